// What a build is: hpcq's version (meson.build's project()), the commit it was
// built from (git describe at build time, "unknown" outside a git checkout)
// and the protocol it speaks (protocol_version.h). For --version and for the
// agent's Hello.
//
// The commit lives in one generated file (build_commit.cc, meson's vcs_tag)
// in a library of its own, hpcq_build_info, linked only by the executables
// that print it: a new commit recompiles that file and relinks them, nothing
// else.
#pragma once

#include <string>
#include <string_view>

namespace hpcq {

// "88f0ac6", "88f0ac6-dirty", or "unknown".
const char* build_commit();
// "0.1.0+88f0ac6": the version with the commit as build metadata.
std::string version_with_commit();
// --version's line: "hpcq-agent 0.1.0 (commit 88f0ac6, protocol 2)".
std::string version_line(std::string_view program);

}  // namespace hpcq

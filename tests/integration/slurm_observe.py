"""What a user observes of a Slurm-like system running tests/slurm_corpus:
the differential test of hpcq's Slurm compatibility layer (issue 47 item 6).

The same code observes real Slurm (bench/slurm_differential.py records it in
tests/data/slurm_observed.json) and hpcq through its compat commands: the
commands are whatever sbatch, squeue, sacct, scontrol and scancel `env`'s PATH
finds first.

    observed = observe(corpus_dir, env, workdir)
    for line in compare(expected, observed, load_known_differences(path)):
        print(line)

Each corpus entry NN_name.sh is submitted with `sbatch --parsable` from a
directory of its own (workdir/NN_name, its SLURM_SUBMIT_DIR), so every file
there is its output. Header lines `# corpus: key[=value]` say how to submit it
(see tests/slurm_corpus/README.md). What is recorded is normalised so that two
runs, or two systems, compare equal where a user would see the same thing:
an entry's own job is J (array elements J_<index>, steps J.<step>), another
entry's job J@<entry>; each job's nodes are N1, N2... in the order of its
SLURM_JOB_NODELIST; the user, uid and gid are USER, UID, GID; the submit
directory SUBMITDIR, the work directory WORKDIR; the cluster and default
partition CLUSTER and PARTITION; times, pids and ports are dropped.
"""
import datetime
import difflib
import fnmatch
import getpass
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import time

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
SACCT_FIELDS = "JobID,JobName,State,ExitCode,NNodes,NTasks,AllocCPUS"
SQUEUE_FORMATS = ("%i %j %T %D", "%i %T %r")
# A mark in the submitting environment, for the --export entries.
SUBMIT_MARK = ("CORPUS_MARK", "submitted")
VARYING = re.compile(r"_(PID|PORTS?|TIME)$|^SLURM_WORKING_CLUSTER$")
HEADER = re.compile(r"^#\s*corpus:\s*([\w-]+)(?:=(.*?))?\s*$")
ENV_LINE = re.compile(r"^(?:(\S+): )?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
ENV_TOKEN = re.compile(r"\b([A-Z][A-Z0-9_]*)=(\S*)")
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
TEXT_ID = re.compile(r"\b(JOB |STEP |[Jj]ob |[Ss]tep |JobId=|StepId=|[Jj]ob[Ii]d )"
                     r"(\d+(?:_\d+)?(?:\.\w+)?)")
JOB_ID = re.compile(r"^(\d+)(?:_(\d+|\[[^\]]*\]))?(?:\.(\w+))?$")
SPOOL_SCRIPT = re.compile(r"/\S*/slurm_script\b")
# The peer runs several slurmd on one host, so its step daemons name their node.
STEPD_NODE = re.compile(r"^slurmstepd-[\w.-]+:")


# --- hostlists ---------------------------------------------------------------

def hostlist_expand(expression):
    """`n[1-2],m3` -> ['n1', 'n2', 'm3'] (ranges keep their zero padding)."""
    names = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", expression):
        match = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if not match:
            names.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            for i in range(int(low), int(high or low) + 1):
                names.append(f"{prefix}{str(i).zfill(len(low))}{suffix}")
    return names


def hostlist_compress(names):
    """['N1', 'N2', 'N4'] -> 'N[1-2,4]' (one prefix with numbers; else joined)."""
    numbered = [re.fullmatch(r"(\D*)(\d+)", n) for n in names]
    if not names or not all(numbered) or len({m.group(1) for m in numbered}) != 1:
        return ",".join(names)
    values = sorted({int(m.group(2)) for m in numbered})
    if len(values) == 1:
        return names[0]
    runs, start = [], values[0]
    for previous, value in zip(values, values[1:] + [None]):
        if value != previous + 1:
            runs.append(str(start) if start == previous else f"{start}-{previous}")
            start = value
    return f"{numbered[0].group(1)}[{','.join(runs)}]"


# --- the corpus ----------------------------------------------------------------

def _sbatch_options(tokens, into):
    """Reads the options the observer needs to know from sbatch arguments."""
    names = {"-o": "output", "--output": "output", "-e": "error", "--error": "error",
             "-D": "chdir", "--chdir": "chdir", "-J": "job-name", "--job-name": "job-name",
             "-a": "array", "--array": "array"}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        key, eq, value = token.partition("=")
        if key in names and eq:
            into[names[key]] = value
        elif token in names and i + 1 < len(tokens):
            into[names[token]] = tokens[i + 1]
            i += 1
        elif token[:2] in names and token[:2].startswith("-") and len(token) > 2 \
                and not token.startswith("--"):
            into[names[token[:2]]] = token[2:]
        i += 1
    return into


def load_entry(path):
    """One corpus entry: its header (`# corpus:` lines), its #SBATCH options
    (read as sbatch does, up to the first command) and its extra arguments."""
    name = os.path.basename(path)[:-len(".sh")]
    header, options, directives = {}, {}, []
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines:
        match = HEADER.match(line)
        if match:
            header[match.group(1)] = match.group(2) if match.group(2) is not None else True
    for line in lines[1:] if lines and lines[0].startswith("#!") else lines:
        stripped = line.strip()
        if stripped.startswith("#SBATCH"):
            directives += shlex.split(stripped[len("#SBATCH"):], comments=True)
        elif stripped and not stripped.startswith("#"):
            break
    args = shlex.split(header.get("args", "") or "")
    _sbatch_options(directives, options)
    _sbatch_options(args, options)
    return {"name": name, "path": path, "header": header, "options": options, "args": args}


def load_corpus(corpus_dir, names=None):
    entries = [load_entry(os.path.join(corpus_dir, f))
               for f in sorted(os.listdir(corpus_dir)) if re.match(r"\d+_.*\.sh$", f)]
    if names:
        wanted = {n[:-3] if n.endswith(".sh") else n for n in names}
        entries = [e for e in entries if e["name"] in wanted]
    return entries


def _targets(entry):
    """[(dependency type or None, entry name)] from `depends` and `after`."""
    found = []
    for clause in filter(None, (entry["header"].get("depends") or "").split(",")):
        kind, *targets = clause.split(":")
        found += [(kind, t) for t in targets]
    found += [(None, t) for t in (entry["header"].get("after") or "").split(",") if t]
    return found


# --- running commands ------------------------------------------------------------

class _Commands:
    def __init__(self, env):
        self.env = env
        self.path = env.get("PATH", os.defpath)

    def run(self, *args, cwd=None, check=False):
        exe = shutil.which(args[0], path=self.path) or args[0]
        done = subprocess.run([exe, *args[1:]], env=self.env, cwd=cwd, capture_output=True,
                              text=True, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
        return done


def _system(commands):
    """The names the normaliser replaces: nodes, partition, cluster, user."""
    nodes = []
    for name in commands.run("sinfo", "-h", "-N", "-o", "%N", check=True).stdout.split():
        if name not in nodes:
            nodes.append(name)
    partitions = commands.run("sinfo", "-h", "-o", "%P").stdout.split()
    default = next((p for p in partitions if p.endswith("*")), partitions[0] if partitions else "")
    cluster = None
    config = commands.run("scontrol", "show", "config")
    match = re.search(r"^ClusterName\s*=\s*(\S+)", config.stdout, re.M)
    if match:
        cluster = match.group(1)
    return {"nodes": nodes, "partition": default.rstrip("*"), "cluster": cluster,
            "user": getpass.getuser(), "uid": str(os.getuid()), "gid": str(os.getgid()),
            "host": socket.gethostname().split(".")[0]}


def _field_class(value):
    for name, pattern in (("empty", r""), ("int", r"\d+"), ("exit", r"\d+:\d+"),
                          ("id", r"\d+(?:_(?:\d+|\[[^\]]*\]))?(?:\.\w+)?"),
                          ("word", r"[^\s|]+")):
        if re.fullmatch(pattern, value):
            return name
    return "text"


def shape(line, separator):
    """The class of each field of a command's output line."""
    fields = line.split() if separator == " " else line.split(separator)
    return separator.join(_field_class(f) for f in fields)


# --- normalisation -----------------------------------------------------------------

class _Normaliser:
    """Rewrites one entry's output: its ids, its jobs' nodes, the user, the
    directories, the cluster and partition."""

    def __init__(self, system, entry_dir, workdir, jobs, foreign):
        self.system = system
        self.entry_dir, self.workdir = entry_dir, workdir
        self.raw = {}        # raw job id -> J or J_<index>
        self.master = {}     # submitted id -> J (J@<entry> for another entry's)
        self.nodes = {}      # label -> the job's node names, in hostlist order
        self.raw_of = {}     # label -> raw job id
        for own in jobs:
            self.master[own["submitted"]] = "J"
            for row in own["rows"]:
                label = "J" + (row["JobID"][row["JobID"].index("_"):]
                               if "_" in row["JobID"] else "")
                if "[" in label:
                    continue  # elements never started
                self.raw[row["JobIDRaw"]] = label
                self.raw_of[label] = row["JobIDRaw"]
                if row["NodeList"] not in ("", "None assigned"):
                    self.nodes[label] = hostlist_expand(row["NodeList"])
        for job_id, name in foreign.items():
            self.master.setdefault(job_id, f"J@{name}")
            self.raw.setdefault(job_id, f"J@{name}")
        names = sorted(system["nodes"], key=len, reverse=True)
        # A name may follow a dash ("slurmstepd-n1") but not be part of a word.
        self.node_word = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, names)) +
                                    r")(?!\w)") if names else None
        self.hosts, self.batch_host = {}, None

    # ids
    def job_id(self, text, prefer_master=False):
        """A job id as sacct, squeue and the environment write it."""
        match = JOB_ID.match(text)
        if not match:
            return text
        base, element, step = match.groups()
        if element is not None:
            label = self.master.get(base, "J?") + "_" + element
        elif prefer_master:
            label = self.master.get(base) or self.raw.get(base, "J?")
        else:
            label = self.raw.get(base) or self.master.get(base, "J?")
        return label + (f".{step}" if step else "")

    # hosts
    def start_file(self, label):
        """Maps host names for one output file: its job's nodes first."""
        self.hosts = {}
        self.batch_host = None
        for name in self.nodes.get(label, []):
            self.batch_host = self.batch_host or name
            self.host(name)

    def host(self, name):
        if name not in self.hosts:
            self.hosts[name] = f"N{len(self.hosts) + 1}"
        return self.hosts[name]

    def hosts_in(self, text):
        def bracketed(match):
            names = hostlist_expand(match.group(0))
            if not all(n in self.system["nodes"] for n in names):
                return match.group(0)
            return hostlist_compress([self.host(n) for n in names])
        text = re.sub(r"[A-Za-z][\w-]*\[[\d,\-]+\]", bracketed, text)
        if self.node_word:
            text = self.node_word.sub(lambda m: self.host(m.group(1)), text)
        return text

    # values and lines
    def value(self, key, value):
        if VARYING.search(key):
            return "<varies>"
        if re.search(r"JOB_?ID$|JOBID$|DEPENDENCY$", key):
            return re.sub(r"\d+(?:_\d+)?", lambda m: self.job_id(
                m.group(0), prefer_master="ARRAY_JOB" in key), value)
        if re.search(r"(SUBMIT|COMM)_HOST$|IPADDR$", key):
            if value == self.system["host"]:
                return "SUBMITHOST"
            return IPV4.sub("IPADDR", value)
        if re.search(r"(^|_)(USER|LOGNAME)$", key) and value == self.system["user"]:
            return "USER"
        if key.endswith("UID") and value == self.system["uid"]:
            return "UID"
        if key.endswith("GID") and value == self.system["gid"]:
            return "GID"
        if key.endswith("CLUSTER_NAME") and value and self.system["cluster"] in (None, value):
            return "CLUSTER"
        if "PARTITION" in key and value == self.system["partition"]:
            return "PARTITION"
        return self.hosts_in(value)

    def paths(self, text):
        text = STEPD_NODE.sub("slurmstepd:", text)
        text = text.replace(self.entry_dir, "SUBMITDIR").replace(self.workdir, "WORKDIR")
        return SPOOL_SCRIPT.sub("SCRIPT", ISO_TIME.sub("TIME", text))

    def line(self, text):
        """One output line: (normalised line, (context, key, value) or None)."""
        text = self.paths(text)
        match = ENV_LINE.match(text)
        if match:
            context, key, value = match.groups()
            value = self.value(key, value)
            return f"{context + ': ' if context else ''}{key}={value}", (context, key, value)
        text = TEXT_ID.sub(lambda m: m.group(1) + self.job_id(m.group(2)), text)
        text = re.sub(r"\bpid \d+", "pid PID", text)
        text = ENV_TOKEN.sub(lambda m: f"{m.group(1)}={self.value(m.group(1), m.group(2))}",
                             text)
        return IPV4.sub("IPADDR", self.hosts_in(text)), None

    def sacct_row(self, line):
        fields = line.split("|")
        fields[0] = self.job_id(fields[0])
        fields = [re.sub(r"^CANCELLED by " + re.escape(self.system["uid"]) + "$",
                         "CANCELLED by UID", f) for f in fields]
        return "|".join(fields)

    def squeue_line(self, line):
        first, _, rest = line.partition(" ")
        return " ".join(filter(None, [self.job_id(first), self.hosts_in(rest)]))


def _pattern_regex(pattern):
    """An sbatch file name pattern as a regex, and its parts for rendering."""
    parts, regex, count = [], "", 0
    for token in re.findall(r"%%|%\d*[A-Za-z]|[^%]+|%", pattern):
        if token == "%%":
            regex += "%"
            parts.append(("text", "%"))
        elif re.fullmatch(r"%\d*[jAaNunstxJ]", token):
            role, count = token[-1], count + 1
            group = f"g{count}"
            body = r"\d+(?:\.\d+)?" if role == "J" else r"\d+" if role in "jAanst" else r"[^/]+?"
            regex += f"(?P<{group}>{body})"
            parts.append((role, group))
        else:
            regex += re.escape(token)
            parts.append(("text", token))
    return re.compile(regex + "$"), parts


class _Files:
    """Names an entry's output files: by the --output/--error patterns the
    entry asked for (so that each field is rewritten by its role), else by
    replacing the ids, hosts and user the name holds."""

    def __init__(self, entry):
        options = entry["options"]
        default = "slurm-%A_%a.out" if "array" in options else "slurm-%j.out"
        chdir = options.get("chdir", "")
        self.patterns = [_pattern_regex(os.path.join(chdir, p))
                         for p in (options.get("output", default), options.get("error"))
                         if p and not os.path.isabs(p)]

    def match(self, relative, norm):
        """(the pattern's match and parts or None, label of the file's job or None)."""
        for regex, parts in self.patterns:
            match = regex.match(relative)
            if not match:
                continue
            values = {role: match.group(group) for role, group in parts if role != "text"}
            if "j" in values:
                return (match, parts), norm.raw.get(values["j"])
            if "a" in values:
                return (match, parts), f"J_{values['a']}"
            return (match, parts), norm.master.get(values.get("A"))
        return None, None

    @staticmethod
    def render(relative, matched, norm):
        if matched is None:
            text = re.sub(r"\d+_\d+", lambda m: norm.job_id(m.group(0)), relative)
            text = re.sub(r"(?<![\d_])\d+(?![\d_])",
                          lambda m: norm.raw.get(m.group(0), m.group(0)), text)
            text = re.sub(r"(?<![\w.-])" + re.escape(norm.system["user"]) + r"(?![\w-])",
                          "USER", text)
            return norm.hosts_in(text)
        match, parts = matched
        out = []
        for role, group in parts:
            value = group if role == "text" else match.group(group)
            if role == "j":
                value = norm.job_id(value)
            elif role == "A":
                value = norm.job_id(value, prefer_master=True)
            elif role == "N":
                # The peer's nodes share the machine's hostname, which is what
                # Slurm's %N gives (a site's nodes have names of their own).
                if value == norm.system["host"] and norm.batch_host:
                    value = norm.batch_host
                value = norm.hosts_in(value)
            elif role == "u" and value == norm.system["user"]:
                value = "USER"
            out.append(value)
        return "".join(out)


# --- observing -------------------------------------------------------------------------

def _submit(commands, entry, workdir, submitted):
    cwd = os.path.join(workdir, entry["name"])
    os.makedirs(cwd, exist_ok=True)
    for sub in filter(None, (entry["header"].get("mkdir") or "").split(",")):
        os.makedirs(os.path.join(cwd, sub), exist_ok=True)
    dependency = []
    for kind, target in _targets(entry):
        if target not in submitted:
            raise ValueError(f"{entry['name']}: depends on {target}, not submitted before it")
        if kind:
            dependency.append(f"{kind}:{submitted[target]}")
    args = ["sbatch", "--parsable"]
    if dependency:
        args.append("--dependency=" + ",".join(dependency))
    args += entry["args"]
    if "no-script" not in entry["header"]:
        args.append(entry["path"])
    done = commands.run(*args, cwd=cwd)
    return done, args


def _sacct_rows(commands, job_ids, fields, steps=True):
    args = ["sacct", "-P", "-n", f"--format={fields}", "-j", ",".join(job_ids)]
    if not steps:
        args.insert(3, "-X")
    out = commands.run(*args).stdout
    names = fields.split(",")
    return [dict(zip(names, line.split("|"))) for line in out.splitlines() if line.strip()]


def _squeue(commands, job_id):
    return {fmt: commands.run("squeue", "-h", "-j", job_id, "-o", fmt).stdout.strip()
            for fmt in SQUEUE_FORMATS}


def _all_ended(commands, job_ids):
    rows = _sacct_rows(commands, job_ids, "JobIDRaw,JobID,State")
    seen = {r["JobID"].split("_")[0].split(".")[0] for r in rows}
    return (set(job_ids) <= seen and
            all(r["State"].split()[0] in TERMINAL for r in rows if r["State"]))


def _wait(commands, entries, submitted, records, timeout_s):
    """Polls sacct until every job has ended; meanwhile cancels the entries
    that asked to be cancelled once squeue gives a reason."""
    waiting = {e["name"]: e["header"]["cancel-when-reason"] for e in entries
               if e["name"] in submitted and e["header"].get("cancel-when-reason")}
    job_ids = list(submitted.values())
    deadline = time.monotonic() + timeout_s
    while True:
        for name, reason in list(waiting.items()):
            got = commands.run("squeue", "-h", "-j", submitted[name], "-o", "%r").stdout.strip()
            # A job squeue no longer shows has ended without the reason (a
            # system that ends what can never run): nothing to wait for.
            if got in (reason, "") or time.monotonic() > deadline:
                records[name]["squeue_raw"] = _squeue(commands, submitted[name])
                commands.run("scancel", submitted[name])
                del waiting[name]
        if not waiting and _all_ended(commands, job_ids):
            return True
        if time.monotonic() > deadline:
            commands.run("scancel", *job_ids)  # not to run into the next observation
            return False
        time.sleep(0.5)


def _when(text):
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None


def _read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def _observe_entry(entry, record, system, workdir, commands, submitted):
    name = entry["name"]
    job_id = record.get("job_id")
    raw = {"submit": record["submit_raw"]}
    result = {"submit": {"rc": record["submit_raw"]["rc"],
                         "shape": shape(record["submit_raw"]["stdout"].strip(), ";")}}
    jobs, foreign = [], {}
    for kind, target in _targets(entry):
        if target in submitted:
            foreign[submitted[target]] = target
    if job_id:
        rows = _sacct_rows(commands, [job_id], "JobID,JobIDRaw,NodeList,Start,End",
                           steps=False)
        jobs.append({"submitted": job_id, "rows": rows})
        raw["jobs"] = rows
    entry_dir = os.path.join(workdir, name)
    norm = _Normaliser(system, entry_dir, workdir, jobs, foreign)
    printed = record["submit_raw"]["stdout"].strip()
    if printed:  # "<id>" or "<id>;<cluster>"
        job, *cluster = printed.split(";")
        printed = ";".join([norm.job_id(job, prefer_master=True)] +
                           ["CLUSTER" if c == system["cluster"] else c for c in cluster])
    result["submit"]["stdout"] = printed
    result["submit"]["stderr"] = [norm.line(l)[0] for l in
                                  record["submit_raw"]["stderr"].splitlines()]
    if job_id:
        detail = commands.run("sacct", "-P", "-n", "-D", f"--format={SACCT_FIELDS}",
                              "-j", job_id).stdout.splitlines()
        default = commands.run("sacct", "-P", "-n", "-j", job_id).stdout.splitlines()
        raw["sacct"], raw["sacct_default"] = detail, default
        order = lambda row: [int(p) if p.isdigit() else p
                             for p in re.split(r"(\d+)", row.split("|")[0])]
        result["sacct"] = sorted((norm.sacct_row(l) for l in detail), key=order)
        result["sacct_shape"] = [shape(l, "|") for l in sorted(
            default, key=lambda l: order(norm.sacct_row(l)))]
        if "squeue_raw" in record:
            raw["squeue"] = record["squeue_raw"]
            result["squeue"] = {fmt: norm.squeue_line(line)
                                for fmt, line in record["squeue_raw"].items()}
            result["squeue_shape"] = {fmt: shape(line, " ")
                                      for fmt, line in record["squeue_raw"].items()}
        starts = [_when(r["Start"]) for r in jobs[0]["rows"]]
        for _, target in [] if "cancel-when-reason" in entry["header"] else _targets(entry):
            ends = [_when(r["End"]) for r in _sacct_rows(
                commands, [submitted[target]], "JobID,End", steps=False)]
            if all(starts + ends):
                result.setdefault("order", {})[f"started after {target} ended"] = \
                    min(starts) >= max(ends)
    if "submit-fails" in entry["header"]:
        # Slurm records some refused submissions as failed jobs.
        job_name = entry["options"].get("job-name") or os.path.basename(entry["path"])
        rows = commands.run("sacct", "-a", "-P", "-n", "-X", "-S", record["began"],
                            f"--name={job_name}", "--format=JobName,State,ExitCode")
        raw["sacct_after_refusal"] = rows.stdout.splitlines()
        result["sacct_after_refusal"] = [norm.sacct_row(l) for l in rows.stdout.splitlines()]
    files = _Files(entry)
    result["files"], result["env"], raw["files"] = {}, {}, {}
    for top, _, names in os.walk(entry_dir):
        for file_name in sorted(names):
            path = os.path.join(top, file_name)
            relative = os.path.relpath(path, entry_dir)
            text = _read(path)
            raw["files"][relative] = text
            matched, label = files.match(relative, norm)
            if label is None:
                in_env = re.search(r"^SLURM_JOB_ID=(\d+)$", text, re.M)
                label = norm.raw.get(in_env.group(1)) if in_env else (
                    next(iter(norm.raw_of)) if len(norm.raw_of) == 1 else None)
            norm.start_file(label)
            normal = files.render(relative, matched, norm)
            lines, env = [], {}
            racy = entry["header"].get("drop-lines")
            for line in text.splitlines():
                if racy and re.search(racy, line):
                    continue
                line, assignment = norm.line(line)
                if assignment and assignment[1].startswith(("SLURM_", "SLURMD_")):
                    context, key, value = assignment
                    values = env.setdefault(f"{context}:{key}" if context else key, [])
                    if value not in values:
                        values.append(value)
                else:
                    lines.append(line)
            result["files"][normal] = sorted(lines) if "unordered" in entry["header"] else lines
            if env:
                result["env"][normal] = {k: sorted(v) for k, v in env.items()}
    return result, raw


def observe(corpus_dir, env, workdir, names=None, timeout_s=600, raw=None):
    """Runs the corpus (or the entries `names`) with the commands `env`'s PATH
    finds, each entry from workdir/<entry>; returns {entry: observation}.
    `raw`, a dict, receives what the commands printed before normalising."""
    commands = _Commands(dict({k: v for k, v in env.items()
                               if not k.startswith("SLURM_") or k == "SLURM_CONF"},
                              **dict([SUBMIT_MARK])))
    workdir = os.path.realpath(workdir)
    system = _system(commands)
    began = datetime.datetime.now().replace(microsecond=0) - datetime.timedelta(seconds=1)
    entries = load_corpus(corpus_dir, names)
    submitted, records = {}, {}
    for entry in entries:
        done, args = _submit(commands, entry, workdir, submitted)
        record = {"submit_raw": {"args": args, "rc": done.returncode, "stdout": done.stdout,
                                 "stderr": done.stderr}, "began": began.isoformat()}
        job_id = done.stdout.strip().split(";")[0] if done.returncode == 0 else None
        if job_id:
            record["job_id"] = submitted[entry["name"]] = job_id
        if bool(job_id) == ("submit-fails" in entry["header"]):
            record["unexpected"] = "submitted" if job_id else "refused"
        records[entry["name"]] = record
    for entry in entries:
        if "release" in entry["header"] and entry["name"] in submitted:
            records[entry["name"]]["squeue_raw"] = _squeue(commands, submitted[entry["name"]])
            commands.run("scontrol", "release", submitted[entry["name"]])
    ended = _wait(commands, entries, submitted, records, timeout_s)
    observed = {}
    if raw is not None:  # every job sacct knows of since the start, the corpus's or not
        every = commands.run("sacct", "-a", "-P", "-n", "-X", "-S", began.isoformat(),
                             "--format=JobIDRaw,JobID,JobName,State,ExitCode").stdout
        raw.update(system=system, ended=ended, entries={}, sacct_since_start=every.splitlines())
    for entry in entries:
        record = records[entry["name"]]
        result, entry_raw = _observe_entry(entry, record, system, workdir, commands, submitted)
        if "unexpected" in record:
            result["unexpected"] = record["unexpected"]
        if not ended:
            result["ended"] = False
        observed[entry["name"]] = result
        if raw is not None:
            raw["entries"][entry["name"]] = entry_raw
    return observed


# --- comparing ---------------------------------------------------------------------------

def load_known_differences(path):
    """{(script, key): reason} from a JSON list of {script, key, reason}
    (script and key may be shell patterns: `*`, `env/*/SLURM_CONF`)."""
    with open(path) as f:
        items = json.load(f)
    if isinstance(items, dict):  # the empty file: {}
        items = items.get("differences", [])
    return {(i["script"], i["key"]): i["reason"] for i in items}


def _flatten(record, prefix=""):
    flat = {}
    for key, value in record.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, path + "/"))
        else:
            flat[path] = value
    return flat


def _describe(expected, observed):
    if isinstance(expected, list) and isinstance(observed, list):
        changes = [l for l in difflib.ndiff(expected, observed) if l[:1] in "-+"]
        shown = "; ".join(l[:2] + repr(l[2:]) for l in changes[:4])
        more = f" (+{len(changes) - 4} more)" if len(changes) > 4 else ""
        return shown + more
    return f"expected {expected!r}, observed {observed!r}"


def compare(expected, observed, known_differences):
    """One line per difference between two observations that
    known_differences ({(script, key): reason}, shell patterns) does not list."""
    def known(script, key):
        return any(fnmatch.fnmatchcase(script, s) and fnmatch.fnmatchcase(key, k)
                   for s, k in known_differences)
    differences = []
    for script in sorted(set(expected) | set(observed)):
        if script not in observed or script not in expected:
            if not known(script, "*"):
                differences.append(f"{script}: only in the "
                                   f"{'expected' if script in expected else 'observed'} run")
            continue
        want, got = _flatten(expected[script]), _flatten(observed[script])
        for key in sorted(set(want) | set(got)):
            if want.get(key) == got.get(key) or known(script, key):
                continue
            if key not in got:
                differences.append(f"{script}: {key}: missing (expected {want[key]!r})")
            elif key not in want:
                differences.append(f"{script}: {key}: unexpected {got[key]!r}")
            else:
                differences.append(f"{script}: {key}: {_describe(want[key], got[key])}")
    return differences


if __name__ == "__main__":
    import sys
    if len(sys.argv) not in (3, 4):
        raise SystemExit("usage: slurm_observe.py EXPECTED.json OBSERVED.json [KNOWN.json]")
    with open(sys.argv[1]) as a, open(sys.argv[2]) as b:
        expected, observed = json.load(a), json.load(b)
    known = load_known_differences(sys.argv[3]) if len(sys.argv) == 4 else {}
    found = compare(expected, observed, known)
    print("\n".join(found) or "no differences")
    sys.exit(1 if found else 0)

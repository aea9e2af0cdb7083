// The shape of the commands that list (queue, history, nodes, queues,
// leaders, reservations): one call, printed for people as a table or, with
// --json, as a JSON array of its items.
#pragma once

#include <iostream>
#include <string_view>

#include "cli/client.h"
#include "cli/format.h"

namespace hpcq::cli {

// Calls `method` with `request`; prints `table(response)`, or with `json`
// `item_json` of each of `items(response)` as one array. Returns the
// command's exit status.
template <typename Response, typename Request, typename Items, typename ItemJson, typename Table>
int print_list(std::string_view method, const Request& request, bool json, Items items,
               ItemJson item_json, Table table) {
  Client client(socket_path());
  Response response;
  Status s = client.call(method, request, &response);
  if (!s.is_ok()) return fail(s);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : items(response)) out.push_back(item_json(item));
    std::cout << json_text(out, 2) << "\n";
  } else {
    std::cout << table(response);
  }
  return 0;
}

}  // namespace hpcq::cli

// What the JSON readers (coco_json, coco_panoptic) say about a value in their messages. Header
// only: the readers that include it link simdjson themselves.
#pragma once

#include <simdjson.h>

#include <string>

namespace tally::support {

/// What a JSON value is, for messages: its kind and, for short values, the value itself ("the
/// number 3", "an array [1,2]", "null").
inline std::string found(simdjson::dom::element v) {
  namespace dom = simdjson::dom;
  const char* kind = "a value";
  switch (v.type()) {
    case dom::element_type::ARRAY:
      kind = "an array";
      break;
    case dom::element_type::OBJECT:
      kind = "an object";
      break;
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
    case dom::element_type::DOUBLE:
      kind = "the number";
      break;
    case dom::element_type::STRING:
      kind = "the string";
      break;
    case dom::element_type::BOOL:
      kind = "the bool";
      break;
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  std::string text = simdjson::minify(v);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(kind) + " " + text;
}

}  // namespace tally::support

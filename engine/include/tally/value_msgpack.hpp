// tally::Value as msgpack, for libtally and host programs (results travel between ranks and into
// records and checkpoints this way; not part of the plugin SDK): null, bool, int, float64, str,
// array and map (string keys, order kept).
#pragma once

#include <bit>
#include <cstdint>
#include <string>

#include <msgpack.hpp>

#include "tally/sdk/value.hpp"

// msgpack: null, bool, int, float64, str, array and map (string keys, order kept).
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  template <>
  struct pack<tally::Value> {
    template <class Stream>
    packer<Stream>& operator()(packer<Stream>& o, const tally::Value& v) const {
      using K = tally::Value::Kind;
      switch (v.kind()) {
        case K::Null:
          o.pack_nil();
          break;
        case K::Bool:
          o.pack(v.as_bool());
          break;
        case K::Int:
          o.pack(v.as_int());
          break;
        case K::Float: {
          // Always float64: msgpack-cxx's pack_double() writes integral doubles (1.0, -0.0) as
          // integers, which would turn a result of 1.0 into the integer 1 after the broadcast.
          const auto bits = std::bit_cast<uint64_t>(v.as_double());
          char buf[9];
          buf[0] = static_cast<char>(0xcbu);
          for (int i = 0; i < 8; ++i) buf[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
          o.pack_bin_body(buf, 9);  // appends the bytes as they are (no header of its own)
          break;
        }
        case K::String:
          o.pack(v.as_string());
          break;
        case K::Array:
          o.pack_array(static_cast<uint32_t>(v.as_array().size()));
          for (const auto& e : v.as_array()) o.pack(e);
          break;
        case K::Map:
          o.pack_map(static_cast<uint32_t>(v.as_map().size()));
          for (const auto& [k, e] : v.as_map()) {
            o.pack(k);
            o.pack(e);
          }
          break;
      }
      return o;
    }
  };

  template <>
  struct convert<tally::Value> {
    const msgpack::object& operator()(const msgpack::object& o, tally::Value& v) const {
      switch (o.type) {
        case type::NIL:
          v = tally::Value();
          break;
        case type::BOOLEAN:
          v = tally::Value(o.via.boolean);
          break;
        case type::POSITIVE_INTEGER:
          if (o.via.u64 > static_cast<uint64_t>(INT64_MAX)) throw msgpack::type_error();
          v = tally::Value(static_cast<long long>(o.via.u64));
          break;
        case type::NEGATIVE_INTEGER:
          v = tally::Value(static_cast<long long>(o.via.i64));
          break;
        case type::FLOAT32:
        case type::FLOAT64:
          v = tally::Value(o.via.f64);
          break;
        case type::STR:
          v = tally::Value(std::string(o.via.str.ptr, o.via.str.size));
          break;
        case type::ARRAY: {
          tally::Value::Array a;
          a.reserve(o.via.array.size);
          for (uint32_t i = 0; i < o.via.array.size; ++i)
            a.push_back(o.via.array.ptr[i].as<tally::Value>());
          v = tally::Value(std::move(a));
          break;
        }
        case type::MAP: {
          tally::Value::Map m;
          m.reserve(o.via.map.size);
          for (uint32_t i = 0; i < o.via.map.size; ++i) {
            const auto& kv = o.via.map.ptr[i];
            if (kv.key.type != type::STR) throw msgpack::type_error();
            m.emplace_back(std::string(kv.key.via.str.ptr, kv.key.via.str.size),
                           kv.val.as<tally::Value>());
          }
          v = tally::Value(std::move(m));
          break;
        }
        default:
          throw msgpack::type_error();
      }
      return o;
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE
}  // namespace msgpack

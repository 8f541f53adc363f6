// tally._tally: the engine (libtally) and its plugins for Python, through nanobind.
//
// Arrays arrive through DLPack or the buffer protocol (NumPy, PyTorch on CPU or CUDA, CuPy, JAX):
// a C-contiguous array of a dtype tally knows is read in place, as a tally::Tensor view that holds
// the Python array alive as long as the engine looks at it; anything else is converted once, by
// the array's own library (.contiguous(), .float(), numpy.ascontiguousarray), and said so in
// add()'s documentation. The GIL is released while metrics accumulate and while ranks sync.
#include <Python.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "tally/evaluator.hpp"
#include "tally/file_io.hpp"
#include "tally/launch.hpp"
#include "tally/records.hpp"
#include "tally/registry.hpp"
#include "tally/reports/compare.hpp"
#include "tally/reports/reports.hpp"
#include "tally/reports/run.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/version.hpp"

namespace nb = nanobind;
namespace fs = std::filesystem;

namespace {

using Array = nb::ndarray<nb::ro>;

// ---- arrays -> tally::Tensor
// ---------------------------------------------------------------------

std::optional<tally::DType> dtype_of(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  if (t.lanes != 1) return std::nullopt;
  const auto code = static_cast<C>(t.code);
  if (code == C::Bool && t.bits == 8) return tally::DType::Bool;
  if (code == C::Float && t.bits == 32) return tally::DType::F32;
  if (code == C::Float && t.bits == 64) return tally::DType::F64;
  if (code == C::Int) {
    switch (t.bits) {
      case 8:
        return tally::DType::I8;
      case 16:
        return tally::DType::I16;
      case 32:
        return tally::DType::I32;
      case 64:
        return tally::DType::I64;
    }
  }
  if (code == C::UInt) {
    switch (t.bits) {
      case 8:
        return tally::DType::U8;
      case 16:
        return tally::DType::U16;
      case 32:
        return tally::DType::U32;
    }
  }
  return std::nullopt;
}

std::string dtype_text(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  const char* kind = "?";
  switch (static_cast<C>(t.code)) {
    case C::Int:
      kind = "int";
      break;
    case C::UInt:
      kind = "uint";
      break;
    case C::Float:
      kind = "float";
      break;
    case C::Bfloat:
      kind = "bfloat";
      break;
    case C::Complex:
      kind = "complex";
      break;
    case C::Bool:
      kind = "bool";
      break;
    default:
      kind = "other";
      break;
  }
  return t.lanes == 1 ? fmt::format("{}{}", kind, t.bits)
                      : fmt::format("{}{}x{}", kind, t.bits, t.lanes);
}

bool c_contiguous(const Array& a) {
  for (std::size_t i = 0; i < a.ndim(); ++i)
    if (a.shape(i) == 0) return true;  // no element: any strides
  std::int64_t expected = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    const auto n = static_cast<std::int64_t>(a.shape(i));
    if (n != 1 && a.stride(i) != expected) return false;
    expected *= n;
  }
  return true;
}

bool is_cuda_device(int device_type) {
  return device_type == nb::device::cuda::value || device_type == nb::device::cuda_managed::value;
}
bool is_cpu_device(int device_type) {
  return device_type == nb::device::cpu::value || device_type == nb::device::cuda_host::value;
}

std::string device_text(int device_type) {
  switch (device_type) {
    case nb::device::cpu::value:
      return "cpu";
    case nb::device::cuda::value:
      return "cuda";
    case nb::device::cuda_host::value:
      return "cuda_host";
    case nb::device::cuda_managed::value:
      return "cuda_managed";
    case nb::device::rocm::value:
      return "rocm";
    case nb::device::metal::value:
      return "metal (mps)";
    case nb::device::oneapi::value:
      return "oneapi (xpu)";
  }
  return fmt::format("DLPack device type {}", device_type);
}

nb::object numpy() { return nb::module_::import_("numpy"); }

bool has_attr(nb::handle o, const char* name) { return PyObject_HasAttrString(o.ptr(), name) == 1; }

// `o` as an array without any conversion by nanobind (no copy); nullopt when it is none.
std::optional<Array> as_array(nb::handle o) {
  Array a;
  if (nb::try_cast(o, a, /*convert=*/false)) return a;
  return std::nullopt;
}

std::string py_type_name(nb::handle o) {
  return nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(o.ptr())))));
}

// What a field's value becomes, and whether the engine reads the caller's memory in place.
struct Converted {
  tally::Tensor tensor;
  bool copied = false;
};

Converted to_tensor(const std::string& field, nb::object o) {
  bool copied = false;
  // A torch tensor that requires grad refuses DLPack export: its data is what is evaluated.
  if (has_attr(o, "requires_grad") && nb::cast<bool>(o.attr("requires_grad")))
    o = o.attr("detach")();
  std::optional<Array> a = as_array(o);
  const std::string given = a ? std::string() : py_type_name(o);
  if (!a) {
    // Python numbers and lists of numbers, and objects with __array__ only: NumPy converts.
    const auto unreadable = [&](const std::string& why) {
      return tally::InputError(fmt::format(
          "field '{}': expected an array (NumPy, torch, anything with __dlpack__ or the buffer "
          "protocol), a list of arrays (ragged), strings, or numbers; found {}{}",
          field, given, why));
    };
    try {
      o = numpy().attr("asarray")(o);
    } catch (nb::python_error& e) {
      throw unreadable(fmt::format(" that NumPy cannot convert: {}", e.what()));
    }
    copied = true;
    a = as_array(o);
    if (!a) throw unreadable("");
  }
  const int dev = a->device_type();
  if (!is_cpu_device(dev) && !is_cuda_device(dev))
    throw tally::InputError(fmt::format(
        "field '{}': arrays on {} are not supported: tally reads CPU and CUDA memory (move it "
        "with .cpu() or .cuda())",
        field, device_text(dev)));
  // Half precision (float16, bfloat16) is widened to float32 by the array's own library.
  if (!dtype_of(a->dtype())) {
    const auto t = a->dtype();
    const bool half =
        (static_cast<nb::dlpack::dtype_code>(t.code) == nb::dlpack::dtype_code::Float ||
         static_cast<nb::dlpack::dtype_code>(t.code) == nb::dlpack::dtype_code::Bfloat) &&
        t.bits == 16 && t.lanes == 1;
    if (!half)
      throw tally::InputError(fmt::format(
          "field '{}': dtype {} is not supported (expected bool, int8/16/32/64, uint8/16/32, "
          "float16/bfloat16 (widened), float32 or float64)",
          field, dtype_text(t)));
    if (has_attr(o, "float") && has_attr(o, "data_ptr"))
      o = o.attr("float")();  // torch
    else if (is_cpu_device(dev))
      o = numpy().attr("asarray")(o, "float32");
    else
      throw tally::InputError(fmt::format(
          "field '{}': a 16-bit float array on the GPU that is not a torch tensor: convert it to "
          "float32 first",
          field));
    copied = true;
    a = as_array(o);
    if (!a || !dtype_of(a->dtype()))
      throw tally::InputError(
          fmt::format("field '{}': could not widen {} to float32", field, dtype_text(t)));
  }
  if (!c_contiguous(*a)) {
    if (has_attr(o, "contiguous") && has_attr(o, "data_ptr"))
      o = o.attr("contiguous")();  // torch
    else if (is_cpu_device(a->device_type()))
      o = numpy().attr("ascontiguousarray")(o);
    else if (has_attr(o, "__cuda_array_interface__"))
      o = nb::module_::import_("cupy").attr("ascontiguousarray")(o);
    else
      throw tally::InputError(fmt::format(
          "field '{}': a strided (non-contiguous) GPU array: make it contiguous first", field));
    copied = true;
    a = as_array(o);
    if (!a || !c_contiguous(*a))
      throw tally::InputError(
          fmt::format("field '{}': could not make the array contiguous", field));
  }
  std::vector<std::int64_t> shape(a->ndim());
  for (std::size_t i = 0; i < a->ndim(); ++i) shape[i] = static_cast<std::int64_t>(a->shape(i));
  const tally::Device device =
      is_cuda_device(a->device_type()) ? tally::Device::cuda(a->device_id()) : tally::Device::cpu();
  // The view holds the array (its DLPack capsule or buffer keeps the memory alive) as long as
  // the engine reads it; it is released with the GIL held, from whichever thread drops the last
  // view (the metrics may run on worker threads), unless the interpreter has finalized.
  const void* data = a->data();
  const tally::DType dtype = *dtype_of(a->dtype());
  std::shared_ptr<const void> keepalive(new Array(std::move(*a)), [](const void* p) {
    if (!Py_IsInitialized()) return;
    const PyGILState_STATE g = PyGILState_Ensure();
    delete static_cast<const Array*>(p);
    PyGILState_Release(g);
  });
  return {tally::Tensor::view(data, dtype, std::move(shape), device, std::move(keepalive)), copied};
}

bool is_str(nb::handle o) { return PyUnicode_Check(o.ptr()) != 0; }
bool is_sequence(nb::handle o) { return PyList_Check(o.ptr()) != 0 || PyTuple_Check(o.ptr()) != 0; }

std::string utf8(const std::string& field, nb::handle s) {
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(s.ptr(), &n);
  if (p == nullptr) {
    PyErr_Clear();
    throw tally::InputError(fmt::format(
        "field '{}': a string that cannot be encoded as UTF-8 (lone surrogates)", field));
  }
  return std::string(p, static_cast<std::size_t>(n));
}

// How a field was read, for tally._inspect_batch (the tests prove in-place reading with it).
struct FieldInfo {
  std::string name, kind, dtype, device;
  std::vector<std::int64_t> shape;
  std::uintptr_t data = 0;
  bool copied = false;
};

tally::Batch to_batch(nb::handle mapping, std::vector<FieldInfo>* info) {
  if (!PyDict_Check(mapping.ptr()) && !has_attr(mapping, "items"))
    throw tally::InputError(
        fmt::format("add(): expected a mapping of field name to values (a dict), found {}",
                    py_type_name(mapping)));
  tally::Batch batch;
  for (nb::handle item : mapping.attr("items")()) {
    nb::handle key = item[0];
    nb::object value = nb::borrow(item[1]);
    if (!is_str(key))
      throw tally::InputError(
          fmt::format("add(): field names are strings; found a key of type {}", py_type_name(key)));
    const std::string field = utf8("?", key);
    FieldInfo fi;
    fi.name = field;
    if (is_sequence(value) && nb::len(value) > 0) {
      nb::handle first = value[0];
      if (is_str(first) || (is_sequence(first) && nb::len(first) > 0 && is_str(first[0])) ||
          (is_sequence(first) && nb::len(first) == 0 && !has_attr(first, "__dlpack__"))) {
        // Text: one string per sample, or a list of strings per sample (references).
        std::vector<std::vector<std::string>> per_sample;
        bool single = true;
        per_sample.reserve(nb::len(value));
        for (nb::handle s : value) {
          if (is_str(s)) {
            per_sample.push_back({utf8(field, s)});
          } else if (is_sequence(s)) {
            single = false;
            std::vector<std::string> refs;
            for (nb::handle r : s) {
              if (!is_str(r))
                throw tally::InputError(fmt::format(
                    "field '{}': sample {} holds a {} among its strings; a text field holds "
                    "strings, or a list of strings per sample",
                    field, per_sample.size(), py_type_name(r)));
              refs.push_back(utf8(field, r));
            }
            per_sample.push_back(std::move(refs));
          } else {
            throw tally::InputError(
                fmt::format("field '{}': sample {} is a {} in a text field (strings expected)",
                            field, per_sample.size(), py_type_name(s)));
          }
        }
        fi.kind = single ? "text" : "text lists";
        fi.shape = {static_cast<std::int64_t>(per_sample.size())};
        batch.set_text(field, tally::Text::from_lists(per_sample));
        if (info) info->push_back(std::move(fi));
        continue;
      }
      if (has_attr(first, "__dlpack__") || has_attr(first, "__array_interface__") ||
          has_attr(first, "__cuda_array_interface__")) {
        // Ragged: one array per sample.
        tally::Batch::Ragged per_sample;
        per_sample.reserve(nb::len(value));
        std::size_t i = 0;
        for (nb::handle s : value) {
          per_sample.push_back(to_tensor(fmt::format("{}[{}]", field, i++), nb::borrow(s)).tensor);
        }
        fi.kind = "ragged";
        fi.shape = {static_cast<std::int64_t>(per_sample.size())};
        batch.set_ragged(field, std::move(per_sample));
        if (info) info->push_back(std::move(fi));
        continue;
      }
    }
    if (is_str(value))
      throw tally::InputError(fmt::format(
          "field '{}': a single string; a text field is a list with one string per sample", field));
    Converted c = to_tensor(field, value);
    fi.kind = "dense";
    fi.dtype = tally::dtype_name(c.tensor.dtype());
    fi.device = c.tensor.is_cuda() ? fmt::format("cuda:{}", c.tensor.device().index) : "cpu";
    fi.shape = c.tensor.shape();
    fi.data = reinterpret_cast<std::uintptr_t>(c.tensor.data());
    fi.copied = c.copied;
    if (c.tensor.dim() == 0)
      throw tally::InputError(fmt::format(
          "field '{}': a scalar (0-d array); a field holds one value per sample: give an array "
          "whose first dimension is the sample",
          field));
    batch.set(field, std::move(c.tensor));
    if (info) info->push_back(std::move(fi));
  }
  return batch;
}

// ---- tally::Value -> Python
// ----------------------------------------------------------------------

nb::object to_python(const tally::Value& v) {
  using K = tally::Value::Kind;
  switch (v.kind()) {
    case K::Null:
      return nb::none();
    case K::Bool:
      return nb::bool_(v.as_bool());
    case K::Int:
      return nb::int_(v.as_int());
    case K::Float:
      return nb::float_(v.as_double());
    case K::String:
      return nb::str(v.as_string().c_str(), v.as_string().size());
    case K::Array: {
      nb::list l;
      for (const auto& x : v.as_array()) l.append(to_python(x));
      return l;
    }
    case K::Map: {
      nb::dict d;
      for (const auto& [k, x] : v.as_map()) d[nb::str(k.c_str(), k.size())] = to_python(x);
      return d;
    }
  }
  return nb::none();
}

nb::dict run_info(const tally::RunInfo& r) {
  nb::dict d;
  d["tally_version"] = tally::kVersion;
  d["config"] = r.config;
  d["backend"] = r.backend;
  d["world_size"] = r.world_size;
  d["samples"] = r.samples;
  d["wall_seconds"] = r.wall_seconds;
  return d;
}

// ---- tally run (tally/reports/run.hpp)
// -------------------------------------------------------------------------------------------
// The library runs it, with the GIL released; its sinks take the GIL to write to sys.stdout and
// sys.stderr (so that pytest's capture, Jupyter and redirections see them). The error that ends
// a run is raised, not printed.

void write_to_sys(const char* stream, std::string_view text) {
  nb::gil_scoped_acquire locked;
  try {
    // Decoded with "replace": the library's lines are escaped already; a table is shown anyway.
    nb::object s = nb::steal(
        PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace"));
    if (!s.is_valid()) throw nb::python_error();
    nb::module_::import_("sys").attr(stream).attr("write")(s);
  } catch (nb::python_error& e) {
    e.discard_as_unraisable(nb::str("tally: writing to sys.stdout or sys.stderr"));
  }
}

tally::RunSinks python_sinks() {
  tally::RunSinks s;
  s.out = [](std::string_view text) { write_to_sys("stdout", text); };
  s.err = [](std::string_view line) { write_to_sys("stderr", line); };
  s.print_errors = false;  // raised by finish_run()
  return s;
}

// Python's run() options ({"output": str | None, ..., "resume": bool}) as the library's request.
tally::RunRequest run_request(const nb::dict& o) {
  tally::RunRequest r;
  const auto path = [&](const char* key) -> std::optional<std::string> {
    if (!o.contains(key) || o[key].is_none()) return std::nullopt;
    return nb::cast<std::string>(o[key]);
  };
  const auto flag = [&](const char* key) { return o.contains(key) && nb::cast<bool>(o[key]); };
  r.output = path("output");
  r.junit = path("junit");
  r.markdown = path("markdown");
  r.html = path("html");
  r.update_baseline = flag("update_baseline");
  r.resume = flag("resume");
  r.quiet = flag("quiet");
  return r;
}

// The outcome for Python (GIL held): the error that ended the run raised as it is (ConfigError,
// InputError, RuntimeError); else (results or None, exit code, message, comparison table), and
// tally/__init__.py raises RegressionError for exit code 3 (and a class by exit code for another
// rank's failure).
nb::tuple finish_run(const tally::RunOutcome& o) {
  if (o.error) std::rethrow_exception(o.error);
  nb::object results = o.results ? to_python(o.results->metrics) : nb::none();
  const std::string comparison = o.comparison ? tally::format_comparison(*o.comparison, false) : "";
  return nb::make_tuple(results, o.exit_code, o.message, comparison);
}

// tally.run(CONFIG): the library opens the config (a rank whose config fails under a launcher
// joins the others as failed, as the command's does) and runs it.
nb::tuple run_config(const std::string& text, const std::string& source,
                     const std::string& base_dir, const std::string& kind,
                     std::vector<std::string> overrides, const nb::dict& options) {
  const bool is_file = kind == "file";
  tally::RunRequest request = run_request(options);
  request.locate_by_key_path = kind == "dict";
  request.config = is_file ? text : source;
  if (!is_file) {
    request.yaml = text;
    request.base_dir = base_dir;
  }
  request.overrides = std::move(overrides);
  std::optional<tally::RunOutcome> outcome;
  {
    nb::gil_scoped_release unlocked;
    outcome.emplace(tally::run(request, python_sinks()));
  }
  return finish_run(*outcome);
}

// ---- the evaluator
// -------------------------------------------------------------------------------

class PyEvaluator {
 public:
  // `config`: the config file, or the name its text goes by ("config", "<yaml>"), for run()'s
  // messages.
  PyEvaluator(tally::Evaluator ev, std::string config)
      : ev_(std::move(ev)), config_(std::move(config)) {}

  // `kind`: "yaml" (text the user wrote) or "dict" (a mapping, serialized: located by key path).
  static PyEvaluator from_yaml(const std::string& text, const std::string& source,
                               const std::string& base_dir, std::vector<std::string> overrides,
                               bool padded_sampler, const std::string& kind) {
    tally::EvaluatorOptions o;
    o.overrides = std::move(overrides);
    o.padded_sampler = padded_sampler;
    o.locate_by_key_path = kind == "dict";
    nb::gil_scoped_release unlocked;  // a backend's start-up waits for the other ranks
    return PyEvaluator(tally::Evaluator::from_yaml(text, std::move(o), source, base_dir), source);
  }
  static PyEvaluator from_file(const std::string& path, std::vector<std::string> overrides,
                               bool padded_sampler) {
    tally::EvaluatorOptions o;
    o.overrides = std::move(overrides);
    o.padded_sampler = padded_sampler;
    nb::gil_scoped_release unlocked;
    return PyEvaluator(tally::Evaluator::from_file(path, std::move(o)), path);
  }

  void add(nb::handle mapping) {
    tally::Batch batch;
    try {
      batch = to_batch(mapping, nullptr);
    } catch (const tally::Error& e) {
      // As the engine does for its own errors: remembered, so that compute() fails every rank
      // with it instead of leaving the others waiting.
      ev_.record_error(e.exit_code(), e.what());
      throw;
    }
    nb::gil_scoped_release unlocked;
    const std::lock_guard lock(*mutex_);
    ev_.add(batch);
  }

  nb::dict compute(std::optional<std::int64_t> dataset_size) {
    tally::Results r;
    {
      nb::gil_scoped_release unlocked;
      const std::lock_guard lock(*mutex_);
      r = ev_.compute(dataset_size);
    }
    last_ = r;
    return nb::cast<nb::dict>(to_python(r.metrics));
  }

  nb::dict last_run() const {
    if (!last_) throw tally::ConfigError("no compute() has returned yet");
    return run_info(last_->run);
  }
  std::string last_json() const {
    if (!last_) throw tally::ConfigError("no compute() has returned yet");
    return last_->to_json();
  }
  nb::object last_intervals() const {
    if (!last_) throw tally::ConfigError("no compute() has returned yet");
    if (last_->intervals.is_null()) return nb::none();
    return to_python(last_->intervals);
  }
  std::string last_table() const {
    if (!last_) throw tally::ConfigError("no compute() has returned yet");
    return tally::format_table(*last_);
  }

  void reset() {
    nb::gil_scoped_release unlocked;
    const std::lock_guard lock(*mutex_);
    ev_.reset();
  }
  void barrier() {
    nb::gil_scoped_release unlocked;
    ev_.barrier();
  }
  nb::bytes save_state() const {
    std::string s;
    {
      nb::gil_scoped_release unlocked;
      const std::lock_guard lock(*mutex_);
      s = ev_.save_state();
    }
    return nb::bytes(s.data(), s.size());
  }
  void load_state(nb::bytes b) {
    // Read in place, not copied: `b` holds its (immutable) bytes alive while the GIL is released.
    const std::string_view bytes(static_cast<const char*>(b.data()), b.size());
    nb::gil_scoped_release unlocked;
    const std::lock_guard lock(*mutex_);
    ev_.load_state(bytes);
  }
  void load_states(const std::vector<nb::bytes>& blobs) {
    std::vector<std::string_view> states;  // in place: `blobs` hold them alive
    for (const auto& b : blobs) states.emplace_back(static_cast<const char*>(b.data()), b.size());
    nb::gil_scoped_release unlocked;
    const std::lock_guard lock(*mutex_);
    ev_.load_states(states);
  }
  void record_error(int code, const std::string& message) { ev_.record_error(code, message); }

  int rank() const { return ev_.rank(); }
  int world_size() const { return ev_.world_size(); }
  int local_rank() const { return ev_.local_rank(); }
  std::string backend() const { return ev_.backend_name(); }
  std::string backend_choice() const { return ev_.backend_choice(); }

  // Collective object exchange for host programs: bytes (pickled by the Python side).
  std::vector<nb::bytes> all_gather_bytes(nb::bytes b) {
    std::vector<std::string> got;
    {
      const std::string mine(static_cast<const char*>(b.data()), b.size());
      nb::gil_scoped_release unlocked;
      got = ev_.all_gather(mine);
    }
    std::vector<nb::bytes> out;
    for (const auto& s : got) out.emplace_back(s.data(), s.size());
    return out;
  }
  nb::bytes broadcast_bytes(nb::bytes b, int src) {
    std::string got;
    {
      const std::string mine(static_cast<const char*>(b.data()), b.size());
      nb::gil_scoped_release unlocked;
      got = ev_.broadcast(mine, src);
    }
    return nb::bytes(got.data(), got.size());
  }

  // tally run on this evaluator's config (tally::run, as the command runs it): see finish_run().
  nb::tuple run(const nb::dict& options) {
    tally::RunRequest request = run_request(options);
    request.config = config_;
    std::optional<tally::RunOutcome> outcome;
    {
      nb::gil_scoped_release unlocked;
      const std::lock_guard lock(*mutex_);
      outcome.emplace(tally::run(ev_, request, python_sinks()));
    }
    if (outcome->results) last_ = outcome->results;
    return finish_run(*outcome);
  }
  // ConfigError when a launcher started several ranks but the backend is a world of one (the
  // command's exit 2 for the same case).
  void check_launcher() const { tally::check_launcher_backend(ev_); }

 private:
  tally::Evaluator ev_;
  std::string config_;
  // add() and compute() run without the GIL: two Python threads on one evaluator take turns.
  // Always taken with the GIL released (a view released inside the engine takes the GIL).
  std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();
  std::optional<tally::Results> last_;
};

nb::list inspect_batch(nb::handle mapping) {
  std::vector<FieldInfo> info;
  const tally::Batch b = to_batch(mapping, &info);
  nb::list out;
  for (const auto& f : info) {
    nb::dict d;
    d["name"] = f.name;
    d["kind"] = f.kind;
    d["dtype"] = f.dtype;
    d["device"] = f.device;
    d["shape"] = nb::cast(f.shape);
    d["data"] = f.data;
    d["copied"] = f.copied;
    out.append(d);
  }
  return out;
}

// tally validate: the config parsed and checked, its plugins loaded, its metrics made, its
// tolerances read, and its reader made (opening the data) when it has a data: section; nothing
// run, no backend started. Returns the reader's fields ([] without data:).
std::vector<std::string> validate(const std::string& text, const std::string& source,
                                  const std::string& base_dir, const std::string& kind,
                                  std::vector<std::string> overrides) {
  const bool is_file = kind == "file";
  tally::EvaluatorOptions o;
  o.overrides = std::move(overrides);
  o.locate_by_key_path = kind == "dict";
  o.validate_only = true;
  nb::gil_scoped_release unlocked;
  tally::Evaluator ev = is_file ? tally::Evaluator::from_file(text, std::move(o))
                                : tally::Evaluator::from_yaml(text, std::move(o), source, base_dir);
  if (const auto& regression = ev.regression()) (void)tally::Tolerances::of(*regression);
  if (!ev.has_data()) return {};
  return ev.make_reader()->fields();
}

std::string plugins_json(const std::vector<std::string>& paths) {
  std::vector<fs::path> ps(paths.begin(), paths.end());
  nb::gil_scoped_release unlocked;
  return tally::plugins_json(tally::Registry::load(ps));
}

// The launcher's environment as tally/launch.hpp reads it (the one table the CLI and backends
// use): tally.ConfigError when the variables are wrong or two launchers disagree.
nb::dict launch_env() {
  const tally::launch::LaunchEnv e = tally::launch::current("launcher environment: ");
  nb::dict d;
  d["rank"] = e.rank;
  d["world_size"] = e.world_size;
  d["local_rank"] = e.local_rank ? nb::cast(*e.local_rank) : nb::none();
  d["source"] = e.source;
  d["launcher"] = e.launcher;
  d["agreeing"] = nb::cast(e.agreeing);
  d["under_mpi"] = e.under_mpi;
  d["srun_step"] = e.srun_step;
  d["job_id"] = e.job_id;
  return d;
}

}  // namespace

namespace {

// Raises `cls(e.what())` with the error's context as attributes (tally/_errors.py: metric, field,
// file, rank, backend, owner; None where the engine did not know).
void raise_tally_error(const nb::object& cls, const tally::Error& e) {
  try {
    nb::object exc = cls(e.what());
    const tally::ErrorContext& c = e.context();
    const auto set = [&](const char* name, const std::string& v) {
      if (!v.empty()) nb::setattr(exc, name, nb::str(v.c_str(), v.size()));
    };
    set("metric", c.metric);
    set("field", c.field);
    set("file", c.file);
    set("backend", c.backend);
    set("owner", c.owner);
    if (c.rank >= 0) nb::setattr(exc, "rank", nb::int_(c.rank));
    PyErr_SetObject(cls.ptr(), exc.ptr());
  } catch (nb::python_error& pe) {
    pe.restore();
  }
}

}  // namespace

NB_MODULE(_tally, m) {
  m.doc() = "tally's engine and plugins (the package tally wraps this module)";
  m.attr("__version__") = tally::kVersion;

  // The exception classes are made in Python (tally/_errors.py: they derive from the builtin
  // classes users catch) and handed over here; C++ errors become them with the engine's message.
  m.def("_set_exceptions",
        [](nb::object config, nb::object input, nb::object runtime, nb::object base) {
          static nb::object cfg, inp, run, err;
          cfg = std::move(config);
          inp = std::move(input);
          run = std::move(runtime);
          err = std::move(base);
          nb::register_exception_translator([](const std::exception_ptr& p, void*) {
            try {
              std::rethrow_exception(p);
            } catch (const tally::ConfigError& e) {
              raise_tally_error(cfg, e);
            } catch (const tally::InputError& e) {
              raise_tally_error(inp, e);
            } catch (const tally::RuntimeError& e) {
              raise_tally_error(run, e);
            } catch (const tally::Error& e) {
              raise_tally_error(err, e);
            }
          });
        });

  nb::class_<PyEvaluator>(m, "_Evaluator")
      .def_static("from_yaml", &PyEvaluator::from_yaml, nb::arg("text"), nb::arg("source"),
                  nb::arg("base_dir"), nb::arg("overrides"), nb::arg("padded_sampler"),
                  nb::arg("kind"))
      .def_static("from_file", &PyEvaluator::from_file, nb::arg("path"), nb::arg("overrides"),
                  nb::arg("padded_sampler"))
      .def("add", &PyEvaluator::add)
      .def("compute", &PyEvaluator::compute, nb::arg("dataset_size") = nb::none())
      .def("last_run", &PyEvaluator::last_run)
      .def("last_json", &PyEvaluator::last_json)
      .def("last_table", &PyEvaluator::last_table)
      .def("last_intervals", &PyEvaluator::last_intervals)
      .def("reset", &PyEvaluator::reset)
      .def("barrier", &PyEvaluator::barrier)
      .def("save_state", &PyEvaluator::save_state)
      .def("load_state", &PyEvaluator::load_state)
      .def("load_states", &PyEvaluator::load_states)
      .def("record_error", &PyEvaluator::record_error)
      .def("all_gather_bytes", &PyEvaluator::all_gather_bytes)
      .def("broadcast_bytes", &PyEvaluator::broadcast_bytes)
      .def("run", &PyEvaluator::run, nb::arg("options"))
      .def("check_launcher", &PyEvaluator::check_launcher)
      .def_prop_ro("rank", &PyEvaluator::rank)
      .def_prop_ro("world_size", &PyEvaluator::world_size)
      .def_prop_ro("local_rank", &PyEvaluator::local_rank)
      .def_prop_ro("backend", &PyEvaluator::backend)
      .def_prop_ro("backend_choice", &PyEvaluator::backend_choice);

  m.def("_inspect_batch", &inspect_batch);
  m.def("_plugins_json", &plugins_json, nb::arg("paths"));
  m.def("_run", &run_config, nb::arg("text"), nb::arg("source"), nb::arg("base_dir"),
        nb::arg("kind"), nb::arg("overrides"), nb::arg("options"));
  m.def("_launch_env", &launch_env);
  m.def("_validate", &validate, nb::arg("text"), nb::arg("source"), nb::arg("base_dir"),
        nb::arg("kind"), nb::arg("overrides"));
}

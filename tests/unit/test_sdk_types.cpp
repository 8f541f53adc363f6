// The SDK's value types: Tensor, Batch, Value (and its msgpack form, tally/value_msgpack.hpp).
// PackedVector's bytes: test_state_bytes.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/state.hpp"
#include "tally/sdk/tensor.hpp"
#include "tally/sdk/value.hpp"
#include "tally/value_msgpack.hpp"

using tally::Batch;
using tally::DType;
using tally::Tensor;
using tally::Text;
using tally::Value;

TEST(Tensor, OwningTensorsAreZeroedAndTyped) {
  Tensor t = Tensor::zeros(DType::F32, {3, 4});
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.describe(), "f32[3, 4]");
  for (int i = 0; i < 12; ++i) EXPECT_EQ(t.data_as<float>()[i], 0.f);
  EXPECT_THROW(t.data_as<double>(), tally::InputError);
  EXPECT_THROW(t.size(2), tally::InputError);
  EXPECT_THROW(Tensor::zeros(DType::F32, {2, -1}), tally::InputError);
}

TEST(Tensor, ViewsKeepTheirOwnerAlive) {
  auto owner =
      std::make_shared<std::vector<std::int64_t>>(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  std::weak_ptr<std::vector<std::int64_t>> watch = owner;
  Tensor v = Tensor::view(owner->data(), DType::I64, {3, 2}, tally::Device::cpu(), owner);
  owner.reset();
  EXPECT_FALSE(watch.expired());
  const Tensor rows = v.slice(1, 3);
  EXPECT_EQ(rows.shape(), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(rows.data_as<std::int64_t>()[0], 3);
  v = Tensor();
  EXPECT_FALSE(watch.expired());  // the slice holds it too
  const Tensor copy = rows.clone();
  EXPECT_NE(copy.data(), rows.data());
  EXPECT_EQ(copy.data_as<std::int64_t>()[3], 6);
  EXPECT_THROW(rows.slice(1, 3), tally::InputError);
}

TEST(Tensor, FromVectorAndCudaDescriptions) {
  const Tensor b = Tensor::from_vector(std::vector<bool>{true, false, true});
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_TRUE(b.data_as<bool>()[2]);
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), tally::InputError);
  int fake = 0;
  const Tensor g = Tensor::view(&fake, DType::U8, {1}, tally::Device::cuda(1));
  EXPECT_TRUE(g.is_cuda());
  EXPECT_EQ(g.describe(), "u8[1] on cuda:1");
  EXPECT_THROW(g.clone(), tally::InputError);
}

TEST(Batch, FieldsShareOneSampleCount) {
  Batch b;
  b.set("scores", Tensor::zeros(DType::F32, {4, 3}));
  b.set("labels", Tensor::zeros(DType::I64, {4}));
  EXPECT_EQ(b.size(), 4);
  try {
    b.set("other", Tensor::zeros(DType::I64, {5}));
    FAIL();
  } catch (const tally::InputError& e) {
    EXPECT_STREQ(e.what(), "batch field 'other' has 5 samples, the other fields have 4");
  }
  EXPECT_THROW(b.set("scalar", Tensor::zeros(DType::I64, {})), tally::InputError);
  try {
    b.tensor("missing");
    FAIL();
  } catch (const tally::InputError& e) {
    EXPECT_STREQ(e.what(), "field 'missing' is not in the batch (fields: scores, labels)");
  }
}

TEST(Batch, RaggedFieldsSliceCloneAndRename) {
  Batch b;
  b.set_ragged("boxes", {Tensor::zeros(DType::F32, {2, 4}), Tensor::zeros(DType::F32, {0, 4}),
                         Tensor::zeros(DType::F32, {5, 4})});
  b.set("ids", Tensor::from_vector(std::vector<std::int64_t>{7, 8, 9}));
  EXPECT_TRUE(b.is_ragged("boxes"));
  EXPECT_THROW(b.tensor("boxes"), tally::InputError);
  EXPECT_THROW(b.ragged("ids"), tally::InputError);
  const Batch tail = b.slice(1, 3);
  EXPECT_EQ(tail.size(), 2);
  EXPECT_EQ(tail.ragged("boxes")[1].size(0), 5);
  EXPECT_EQ(tail.tensor("ids").data_as<std::int64_t>()[0], 8);
  const Batch deep = tail.clone();
  EXPECT_NE(deep.tensor("ids").data(), tail.tensor("ids").data());
  const Batch renamed = b.renamed({{"gt_ids", "ids"}});
  EXPECT_TRUE(renamed.has("gt_ids"));
  EXPECT_FALSE(renamed.has("ids"));
  EXPECT_TRUE(renamed.has("boxes"));
  EXPECT_EQ(renamed.size(), 3);
}

TEST(Batch, TextFieldsHoldStringsPerSampleAndSliceWithoutCopying) {
  Batch b;
  b.set_text("hyp", Text::from_strings({"a cat", "", "the dog"}));
  b.set_text("refs", Text::from_lists({{"a cat", "the cat"}, {"x"}, {}}));
  b.set("ids", Tensor::from_vector(std::vector<std::int64_t>{7, 8, 9}));
  EXPECT_TRUE(b.is_text("hyp"));
  EXPECT_FALSE(b.is_text("ids"));
  EXPECT_EQ(b.text("refs")[0].size(), 2u);
  EXPECT_EQ(b.text("refs")[0][1], "the cat");
  EXPECT_EQ(b.text("refs")[2].size(), 0u);
  EXPECT_EQ(b.single_text("hyp")[1][0], "");
  EXPECT_THROW(b.single_text("refs"), tally::InputError);  // sample 0 holds two strings
  EXPECT_THROW(b.tensor("hyp"), tally::InputError);
  EXPECT_THROW(b.text("ids"), tally::InputError);
  EXPECT_THROW(b.set_text("short", Text::from_strings({"one"})), tally::InputError);

  const Batch tail = b.slice(1, 3);
  EXPECT_EQ(tail.text("hyp").size(), 2);
  EXPECT_EQ(tail.text("hyp")[1][0], "the dog");
  EXPECT_EQ(tail.text("refs")[0][0], "x");
  EXPECT_EQ(&tail.text("hyp")[1][0], &b.text("hyp")[2][0]);  // shared, not copied
  const Batch deep = tail.clone();
  EXPECT_NE(&deep.text("hyp")[1][0], &tail.text("hyp")[1][0]);
  EXPECT_EQ(deep.text("hyp")[1][0], "the dog");
  EXPECT_EQ(deep.text("refs")[1].size(), 0u);
  EXPECT_TRUE(b.renamed({{"pred", "hyp"}}).is_text("pred"));

  EXPECT_THROW(Text::from_flat({"a", "b"}, {0, 2, 1}), tally::InputError);  // decreasing
  EXPECT_THROW(Text::from_flat({"a", "b"}, {0, 1}), tally::InputError);     // does not end at 2
  EXPECT_EQ(Text::from_flat({"a", "b", "c"}, {0, 0, 3}).size(), 2);
  EXPECT_EQ(Text().size(), 0);
}

TEST(Value, MapsKeepOrderAndJsonIsCompact) {
  Value v = Value::map();
  v.set("b", 1);
  v.set("a", Value::Array{1.5, Value(), "x", true});
  v.set("b", 2);  // keeps its place
  EXPECT_EQ(v.to_json(), R"({"b":2,"a":[1.5,null,"x",true]})");
  Value nan = Value::map();
  nan.set("v", std::nan(""));
  EXPECT_EQ(nan.to_json(), R"({"v":null})");
  EXPECT_EQ(Value(0.1).to_json(), "0.1");  // shortest round-trip form
  EXPECT_THROW(v.at("missing"), tally::Error);
  EXPECT_THROW(Value("s").as_int(), tally::ConfigError);
  EXPECT_DOUBLE_EQ(Value(3).as_double(), 3.0);
}

TEST(Value, MsgpackRoundTripIsExact) {
  Value v = Value::map();
  v.set("ints", std::vector<std::int64_t>{INT64_MIN, -1, 0, INT64_MAX});
  v.set("doubles", std::vector<double>{0.1, 1e-300, -0.0, 1.0 / 3.0});
  v.set("nested", Value::Map{{"s", "text"}, {"n", Value()}, {"b", false}});
  msgpack::sbuffer buf;
  msgpack::pack(buf, v);
  Value back;
  msgpack::unpack(buf.data(), buf.size()).get().convert(back);
  EXPECT_EQ(back, v) << back.to_json() << " vs " << v.to_json();
  EXPECT_EQ(back.at("doubles").as_array()[3].as_double(), 1.0 / 3.0);  // bit for bit
  EXPECT_TRUE(std::signbit(back.at("doubles").as_array()[2].as_double()));
  // A result of exactly 1.0 stays a float (msgpack-cxx's pack_double would make it the integer 1).
  msgpack::sbuffer one;
  msgpack::pack(one, Value(1.0));
  Value one_back;
  msgpack::unpack(one.data(), one.size()).get().convert(one_back);
  EXPECT_TRUE(one_back.is_float());
}

// StoredObjectGraph reads a serialized TrackableObjectGraph in place; these
// tests hold it to what protobuf's own parser makes of the same bytes, also
// when the bytes are damaged.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bundle/checkpoint_object_graph_internal.h"
#include "bundle/protos/trackable_object_graph.pb.h"

namespace ckflow::internal {
namespace {

using Proto = tensorflow::TrackableObjectGraph;
using ProtoNode = tensorflow::TrackableObjectGraph::TrackableObject;

// Every field of every message, with unknown fields of each wire type
// (a group nesting another) beside them at each level.
Proto EveryField() {
  Proto g;
  auto unknowns = [](google::protobuf::Message* m) {
    google::protobuf::UnknownFieldSet* u = m->GetReflection()->MutableUnknownFields(m);
    u->AddVarint(90, 7);
    u->AddFixed32(91, 0xdeadbeef);
    u->AddFixed64(92, 1);
    u->AddLengthDelimited(93, "ignored");
    google::protobuf::UnknownFieldSet* group = u->AddGroup(94);
    group->AddVarint(1, 2);
    group->AddGroup(2)->AddLengthDelimited(3, "deeper");
  };
  unknowns(&g);
  ProtoNode* root = g.add_nodes();
  unknowns(root);
  for (int i = 1; i <= 3; ++i) {
    auto* c = root->add_children();
    c->set_node_id(i);
    c->set_local_name("child_" + std::to_string(i));
    if (i == 2) unknowns(c);
  }
  root->mutable_has_checkpoint_values()->set_value(true);
  auto* slot = root->add_slot_variables();
  slot->set_original_variable_node_id(1);
  slot->set_slot_name("momentum");
  slot->set_slot_variable_node_id(3);
  unknowns(slot);
  root->mutable_registered_saver()->set_name("tf.test.Saver");
  root->mutable_registered_saver()->set_object_name("saver_object");

  ProtoNode* variable = g.add_nodes();
  auto* a = variable->add_attributes();
  a->set_name("VARIABLE_VALUE");
  a->set_full_name("dense/kernel");
  a->set_checkpoint_key("model/kernel/.ATTRIBUTES/VARIABLE_VALUE");
  a->set_optional_restore(true);
  unknowns(a);
  variable->mutable_has_checkpoint_values()->set_value(false);

  g.add_nodes();  // no fields at all: has_checkpoint_values absent

  ProtoNode* partitioned = g.add_nodes();
  for (int part = 0; part < 2; ++part) {
    auto* p = partitioned->add_attributes();
    p->set_name("VARIABLE_VALUE");
    p->set_checkpoint_key("part_" + std::to_string(part));
  }
  return g;
}

// The graph holds what `proto` holds (but optional_restore, not kept).
void ExpectSame(const Proto& proto, const StoredObjectGraph& g) {
  ASSERT_EQ(g.nodes_size(), proto.nodes_size());
  for (int id = 0; id < proto.nodes_size(); ++id) {
    SCOPED_TRACE("node " + std::to_string(id));
    const ProtoNode& want = proto.nodes(id);
    const StoredObjectGraph::Node got = g.nodes(id);
    ASSERT_EQ(got.children_size(), want.children_size());
    for (int k = 0; k < want.children_size(); ++k) {
      EXPECT_EQ(got.children(k).node_id(), want.children(k).node_id());
      EXPECT_EQ(got.children(k).local_name(), want.children(k).local_name());
    }
    ASSERT_EQ(got.attributes_size(), want.attributes_size());
    for (int k = 0; k < want.attributes_size(); ++k) {
      EXPECT_EQ(got.attributes(k).name(), want.attributes(k).name());
      EXPECT_EQ(got.attributes(k).full_name(), want.attributes(k).full_name());
      EXPECT_EQ(got.attributes(k).checkpoint_key(), want.attributes(k).checkpoint_key());
    }
    ASSERT_EQ(got.slot_variables_size(), want.slot_variables_size());
    for (int k = 0; k < want.slot_variables_size(); ++k) {
      const auto& s = want.slot_variables(k);
      EXPECT_EQ(got.slot_variables(k).original_variable_node_id(), s.original_variable_node_id());
      EXPECT_EQ(got.slot_variables(k).slot_variable_node_id(), s.slot_variable_node_id());
      EXPECT_EQ(got.slot_variables(k).slot_name(), s.slot_name());
    }
    ASSERT_EQ(got.has_registered_saver(), want.has_registered_saver());
    if (want.has_registered_saver()) {
      EXPECT_EQ(got.registered_saver().name(), want.registered_saver().name());
      EXPECT_EQ(got.registered_saver().object_name(), want.registered_saver().object_name());
    }
    ASSERT_EQ(got.has_checkpoint_values().has_value(), want.has_has_checkpoint_values());
    if (want.has_has_checkpoint_values()) {
      EXPECT_EQ(*got.has_checkpoint_values(), want.has_checkpoint_values().value());
    }
  }
}

TEST(StoredObjectGraphTest, ReadsEveryFieldAsProtobufDoes) {
  const Proto proto = EveryField();
  std::unique_ptr<StoredObjectGraph> g = StoredObjectGraph::Parse(proto.SerializeAsString());
  ASSERT_NE(g, nullptr);
  ExpectSame(proto, *g);
  EXPECT_EQ(g->nodes(1).attributes(0).checkpoint_key(), "model/kernel/.ATTRIBUTES/VARIABLE_VALUE");
  EXPECT_FALSE(g->nodes(2).has_checkpoint_values().has_value());
  EXPECT_EQ(g->nodes(3).attributes_size(), 2);
}

TEST(StoredObjectGraphTest, EmptyBytesAreAGraphWithoutNodes) {
  std::unique_ptr<StoredObjectGraph> g = StoredObjectGraph::Parse("");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->nodes_size(), 0);
}

// A field written twice: a scalar keeps the last value, a message merges.
// Two serialized messages back to back are one message with both's fields.
TEST(StoredObjectGraphTest, RepeatedSingularFieldsMergeAsProtobufDoes) {
  ProtoNode first;
  first.mutable_has_checkpoint_values()->set_value(true);
  first.mutable_registered_saver()->set_name("saver");
  ProtoNode second;
  second.mutable_has_checkpoint_values();  // present but unset: keeps true
  second.mutable_registered_saver()->set_object_name("object");
  // A child whose node_id is written twice: {node_id: 5, local_name: "a",
  // node_id: 9}.
  const std::string child("\x0a\x07\x08\x05\x12\x01\x61\x08\x09", 9);
  const std::string node = first.SerializeAsString() + second.SerializeAsString() + child;
  ASSERT_LT(node.size(), 128u);  // its length fits one varint byte
  const std::string bytes = std::string("\x0a") + static_cast<char>(node.size()) + node;

  Proto expected;
  ASSERT_TRUE(expected.ParseFromString(bytes));
  std::unique_ptr<StoredObjectGraph> g = StoredObjectGraph::Parse(bytes);
  ASSERT_NE(g, nullptr);
  ExpectSame(expected, *g);
  EXPECT_EQ(g->nodes(0).has_checkpoint_values(), true);
  EXPECT_EQ(g->nodes(0).registered_saver().name(), "saver");
  EXPECT_EQ(g->nodes(0).registered_saver().object_name(), "object");
  EXPECT_EQ(g->nodes(0).children(0).node_id(), 9);
  EXPECT_EQ(g->nodes(0).children(0).local_name(), "a");
}

// Every prefix, and every byte changed to each other value: the graph parses
// exactly when protobuf's parser accepts the bytes, and then reads the same.
TEST(StoredObjectGraphTest, AgreesWithProtobufOnDamagedBytes) {
  const std::string bytes = EveryField().SerializeAsString();
  int accepted = 0, rejected = 0;
  auto check = [&](const std::string& damaged, const std::string& what) {
    SCOPED_TRACE(what);
    Proto proto;
    const bool protobuf_ok = proto.ParseFromString(damaged);
    std::unique_ptr<StoredObjectGraph> g = StoredObjectGraph::Parse(damaged);
    ASSERT_EQ(g != nullptr, protobuf_ok);
    if (g != nullptr) {
      ++accepted;
      ExpectSame(proto, *g);
    } else {
      ++rejected;
    }
  };
  for (size_t n = 0; n < bytes.size(); ++n) {
    check(bytes.substr(0, n), "the first " + std::to_string(n) + " bytes");
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int b = 0; b < 256; ++b) {
      if (static_cast<char>(b) == bytes[i]) continue;
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(b);
      check(damaged, "byte " + std::to_string(i) + " set to " + std::to_string(b));
      if (testing::Test::HasFatalFailure()) return;
    }
  }
  // Both outcomes were exercised, many times.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
}

}  // namespace
}  // namespace ckflow::internal

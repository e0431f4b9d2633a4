// Op definitions: what a node of a given op type is, at build time (its shape
// function) and at run time (its kernel).
//
// An OpRegistry maps op type names ("MatMul") to OpDefs. There is no static
// registration: ops/ fills the standard registry from one visible list of
// plain functions (RegisterMathOps(OpRegistry&), ...), and a test can build its
// own registry with fake ops and hand it to a Session.
//
// Build time: Scope::AddNode calls the OpDef's shape function with an
// InferenceContext that holds the input dtypes and (partially known) shapes;
// the function checks them and sets the output dtypes and shapes. An error it
// returns becomes the scope's sticky error, prefixed with the node's name.
//
// Run time: the Session asks the OpDef's kernel factory once per (session,
// node) for a Kernel, a callable that computes the outputs from the inputs.
// Factories parse attributes once, so the step loop does not.
//
// Thread safety: an OpRegistry is filled before use and then read-only. A
// Kernel may be called from several threads at once (concurrent Session::Run
// calls), so a kernel with mutable state guards it itself.

#ifndef CKFLOW_GRAPH_OP_DEF_H_
#define CKFLOW_GRAPH_OP_DEF_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/resource.h"
#include "base/status.h"
#include "base/tensor.h"
#include "base/types.h"

namespace ckflow {

class FileSystem;    // base/file_system.h
class BundleReader;  // bundle/bundle_reader.h: only passed through to kernels

class Node;

// A shape known up to some dimensions (-1) or not at all (unknown rank).
// Up to kInlineRank dimensions are held inline, as TensorShape holds them:
// every variable, attribute and restore item carries one, and a graph of
// thousands of variables read once (a restore) paid a cold heap block for
// each copy's dimensions.
class PartialShape {
 public:
  static constexpr int kInlineRank = 4;

  PartialShape() = default;  // unknown rank
  // -1 = unknown dim
  PartialShape(std::initializer_list<int64_t> dims) { Assign({dims.begin(), dims.size()}); }
  explicit PartialShape(const std::vector<int64_t>& dims) { Assign(dims); }
  // NOLINTNEXTLINE(google-explicit-constructor): every TensorShape is one
  PartialShape(const TensorShape& shape) { Assign(shape.dims()); }
  static PartialShape Unknown() { return PartialShape(); }
  static PartialShape Scalar() { return PartialShape(std::vector<int64_t>{}); }

  bool known_rank() const { return rank_ >= 0; }
  int rank() const { return rank_; }
  int64_t dim(int i) const { return data()[i]; }  // REQUIRES: known_rank()
  // Empty for an unknown rank.
  std::span<const int64_t> dims() const {
    return {data(), static_cast<size_t>(std::max(rank_, 0))};
  }
  // A copy of dims() to edit.
  std::vector<int64_t> dim_sizes() const { return {dims().begin(), dims().end()}; }
  bool IsFullyDefined() const;
  // REQUIRES: IsFullyDefined().
  TensorShape ToTensorShape() const;
  // True if `shape` could be a value of this partial shape.
  bool IsCompatibleWith(const TensorShape& shape) const;
  bool IsCompatibleWith(const PartialShape& other) const;
  // The most specific shape compatible with both; InvalidArgument if none.
  StatusOr<PartialShape> Merge(const PartialShape& other) const;
  std::string ToString() const;  // "[2,?]", "<unknown>"

  friend bool operator==(const PartialShape& a, const PartialShape& b) {
    return a.rank_ == b.rank_ && std::ranges::equal(a.dims(), b.dims());
  }

 private:
  void Assign(std::span<const int64_t> dims);
  const int64_t* data() const { return rank_ <= kInlineRank ? inline_ : heap_.data(); }

  int rank_ = -1;                     // -1: unknown
  int64_t inline_[kInlineRank] = {};  // the dims while rank_ <= kInlineRank
  std::vector<int64_t> heap_;         // the dims past that
};

// Attribute values of a node (TensorFlow's AttrValue, as a C++ variant).
using AttrValue = std::variant<bool, int64_t, float, std::string, DataType, PartialShape, Tensor,
                               std::vector<int64_t>, std::vector<DataType>,
                               std::vector<std::string>, std::vector<PartialShape>>;

class AttrMap {
 public:
  void Set(std::string name, AttrValue value) {
    auto it = LowerBound(attrs_, name);
    if (it != attrs_.end() && it->first == name) {
      it->second = std::move(value);
    } else {
      attrs_.emplace(it, std::move(name), std::move(value));
    }
  }
  bool Has(std::string_view name) const { return Find(name) != nullptr; }
  const AttrValue* Find(std::string_view name) const {
    auto it = LowerBound(attrs_, name);
    return it != attrs_.end() && it->first == name ? &it->second : nullptr;
  }
  // The attribute as T; InvalidArgument naming it if missing or of another
  // type.
  template <typename T>
  StatusOr<T> Get(std::string_view name) const {
    const AttrValue* v = Find(name);
    if (v == nullptr) return InvalidArgumentError("missing attribute '", name, "'");
    if (const T* t = std::get_if<T>(v)) return *t;
    return InvalidArgumentError("attribute '", name, "' has the wrong type");
  }
  // The attribute as T, without a copy; null if missing or of another type.
  template <typename T>
  const T* GetIf(std::string_view name) const {
    const AttrValue* v = Find(name);
    return v == nullptr ? nullptr : std::get_if<T>(v);
  }
  template <typename T>
  T GetOr(std::string_view name, T fallback) const {
    const AttrValue* v = Find(name);
    if (v == nullptr) return fallback;
    if (const T* t = std::get_if<T>(v)) return *t;
    return fallback;
  }
  // By name.
  const std::vector<std::pair<std::string, AttrValue>>& all() const { return attrs_; }

 private:
  // attrs_ or const attrs_: the first attribute not before `name`.
  static auto LowerBound(auto& attrs, std::string_view name) -> decltype(attrs.begin()) {
    return std::lower_bound(attrs.begin(), attrs.end(), name,
                            [](const auto& a, std::string_view n) { return a.first < n; });
  }

  // Sorted by name, in one block: a node has a handful of attributes, and
  // looking one up in a std::map walked a node allocated apart for each,
  // cold in cache when thousands of nodes are read once (a restore's
  // variable declarations).
  std::vector<std::pair<std::string, AttrValue>> attrs_;
};

// What a shape function sees and sets.
struct InferenceContext {
  std::string_view node_name;
  std::string_view op_type;
  const AttrMap* attrs = nullptr;
  std::vector<DataType> input_types;
  std::vector<PartialShape> input_shapes;
  // The input tensors' names ("scope/x:0"), so errors can name them.
  std::vector<std::string> input_names;
  // The value of input i when it is produced by a Const node, else nullptr:
  // lets Reshape, Fill, Sum... infer shapes from constant arguments.
  std::vector<const Tensor*> input_constants;
  // What the graph knows of input i's value read as a shape, when it is an
  // int32/int64 vector made from shapes: Shape(x), Consts, and their
  // Slice and ConcatV2 (unknown dimensions -1). Lets Reshape to
  // Concat(Slice(Shape(x), ...), [units]) keep x's known dimensions, as
  // TensorFlow's shape inference does. nullopt where nothing is known.
  std::vector<std::optional<PartialShape>> input_shape_values;

  std::vector<DataType> output_types;       // set by the shape function
  std::vector<PartialShape> output_shapes;  // same length as output_types

  void AddOutput(DataType dtype, PartialShape shape) {
    output_types.push_back(dtype);
    output_shapes.push_back(std::move(shape));
  }
};
using ShapeFn = std::function<Status(InferenceContext&)>;

// What a kernel sees and sets for one execution of one node.
class KernelContext {
 public:
  // `forwardable`: bit i set if input i's buffer is the run's to reuse
  // (see ForwardInputOrAllocateOutput); the session's executor sets it.
  KernelContext(const Node& node, std::span<const Tensor* const> inputs, std::span<Tensor> outputs,
                ResourceMgr& resources, FileSystem* file_system = nullptr,
                const BundleReader* bundle_reader = nullptr, uint64_t forwardable = 0)
      : node_(node),
        inputs_(inputs),
        outputs_(outputs),
        resources_(resources),
        file_system_(file_system),
        bundle_reader_(bundle_reader),
        forwardable_(forwardable) {}

  const Node& node() const { return node_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const Tensor& input(int i) const { return *inputs_[i]; }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  // Allocates output i, sets it and returns it for filling.
  StatusOr<Tensor*> AllocateOutput(int i, DataType dtype, const TensorShape& shape) {
    CKFLOW_ASSIGN_OR_RETURN(outputs_[i], Tensor::Allocate(dtype, shape));
    return &outputs_[i];
  }
  // Output `output` in input `input`'s buffer when nothing else will read
  // that buffer (the run holds its only reference and this node is its last
  // reader) and it has the output's dtype and element count; otherwise a new
  // buffer, as AllocateOutput. TensorFlow's forward_input_or_allocate_output:
  // an elementwise op then writes memory it has just read, still in cache,
  // instead of a cold buffer (several times faster on large tensors). Only
  // for kernels that read each element of that input before writing the
  // same element of the output, and nothing of it after.
  StatusOr<Tensor*> ForwardInputOrAllocateOutput(int input, int output, DataType dtype,
                                                 const TensorShape& shape);
  // Session-owned state (variables) that outlives one run.
  ResourceMgr& resources() const { return resources_; }
  // The file layer the run's file-touching kernels (SaveV2, RestoreV2,
  // MergeV2Checkpoints, RestoreVariables) must use for every disk effect:
  // RunOptions::file_system, else SessionOptions::file_system; null means
  // FileSystem::Default().
  FileSystem* file_system() const { return file_system_; }
  // RunOptions::bundle_reader: an open checkpoint the run's restore kernels
  // read through instead of opening it; null if the run has none.
  const BundleReader* bundle_reader() const { return bundle_reader_; }

 private:
  const Node& node_;
  std::span<const Tensor* const> inputs_;
  std::span<Tensor> outputs_;
  ResourceMgr& resources_;
  FileSystem* file_system_;
  const BundleReader* bundle_reader_;
  uint64_t forwardable_;
};

using Kernel = std::function<Status(KernelContext&)>;
// Called once per (session, node). May read the node's attributes and input
// types; returns the kernel or an error naming what is wrong.
using KernelFactory = std::function<StatusOr<Kernel>(const Node&)>;

struct OpDef {
  std::string type;
  // Stateful ops (variables, random, save/restore) are never constant-folded
  // and each run executes them again.
  bool stateful = false;
  ShapeFn shape_fn;
  KernelFactory kernel_factory;
};

class OpRegistry {
 public:
  OpRegistry() = default;
  OpRegistry(const OpRegistry&) = delete;
  OpRegistry& operator=(const OpRegistry&) = delete;

  // AlreadyExists if the type is registered already.
  Status Register(OpDef def);
  // nullptr if unknown.
  const OpDef* Find(std::string_view type) const;
  std::vector<std::string> ListTypes() const;

 private:
  std::map<std::string, std::unique_ptr<OpDef>, std::less<>> defs_;
};

// Convenience for kernels that need no attributes.
inline KernelFactory StatelessKernel(Kernel kernel) {
  return [kernel = std::move(kernel)](const Node&) -> StatusOr<Kernel> { return kernel; };
}

}  // namespace ckflow

#endif  // CKFLOW_GRAPH_OP_DEF_H_

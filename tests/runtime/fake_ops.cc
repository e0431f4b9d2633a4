#include "tests/runtime/fake_ops.h"

#include <new>
#include <stdexcept>
#include <utility>

namespace ckflow::testing {
namespace {

ShapeFn NoOutputs() {
  return [](InferenceContext&) { return OkStatus(); };
}

ShapeFn OneOutput(DataType dtype, PartialShape shape) {
  return [dtype, shape](InferenceContext& c) {
    c.AddOutput(dtype, shape);
    return OkStatus();
  };
}

Status FloatInputs(const InferenceContext& c) {
  for (size_t i = 0; i < c.input_types.size(); ++i) {
    if (c.input_types[i] != DT_FLOAT) {
      return InvalidArgumentError("input ", i, " is ", DataTypeName(c.input_types[i]),
                                  ", expected float32");
    }
  }
  return OkStatus();
}

}  // namespace

FakeOps::FakeOps() {
  Register({.type = "Const",
            .shape_fn = [](InferenceContext& c) -> Status {
              CKFLOW_ASSIGN_OR_RETURN(Tensor v, c.attrs->Get<Tensor>("value"));
              c.AddOutput(v.dtype(), v.shape());
              return OkStatus();
            },
            .kernel_factory = [](const Node& n) -> StatusOr<Kernel> {
              CKFLOW_ASSIGN_OR_RETURN(Tensor v, n.attrs().Get<Tensor>("value"));
              return Kernel([v](KernelContext& ctx) {
                ctx.set_output(0, v);
                return OkStatus();
              });
            }});
  Register({.type = "Placeholder",
            .shape_fn = [](InferenceContext& c) -> Status {
              CKFLOW_ASSIGN_OR_RETURN(DataType dtype, c.attrs->Get<DataType>("dtype"));
              c.AddOutput(dtype, c.attrs->GetOr<PartialShape>("shape", PartialShape()));
              return OkStatus();
            },
            .kernel_factory = StatelessKernel(
                [](KernelContext&) { return InvalidArgumentError("a Placeholder must be fed"); })});
  Register({.type = "Add",
            .shape_fn = [](InferenceContext& c) -> Status {
              CKFLOW_RETURN_IF_ERROR(FloatInputs(c));
              CKFLOW_ASSIGN_OR_RETURN(PartialShape s, c.input_shapes[0].Merge(c.input_shapes[1]));
              c.AddOutput(DT_FLOAT, s);
              return OkStatus();
            },
            .kernel_factory = StatelessKernel([](KernelContext& ctx) -> Status {
              const Tensor& a = ctx.input(0);
              const Tensor& b = ctx.input(1);
              if (!(a.shape() == b.shape())) {
                return InvalidArgumentError("shapes differ: ", a.shape().ToString(), " vs ",
                                            b.shape().ToString());
              }
              CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DT_FLOAT, a.shape()));
              auto x = a.flat<float>();
              auto y = b.flat<float>();
              auto z = out->flat<float>();
              for (size_t i = 0; i < z.size(); ++i) z[i] = x[i] + y[i];
              return OkStatus();
            })});
  Register({.type = "NoOp",
            .shape_fn = NoOutputs(),
            .kernel_factory = StatelessKernel([](KernelContext&) { return OkStatus(); })});
  Register({.type = "Split2",
            .shape_fn = [](InferenceContext& c) -> Status {
              CKFLOW_RETURN_IF_ERROR(FloatInputs(c));
              c.AddOutput(DT_FLOAT, c.input_shapes[0]);
              c.AddOutput(DT_FLOAT, c.input_shapes[0]);
              return OkStatus();
            },
            .kernel_factory = StatelessKernel([](KernelContext& ctx) -> Status {
              const Tensor& x = ctx.input(0);
              CKFLOW_ASSIGN_OR_RETURN(Tensor * neg, ctx.AllocateOutput(1, DT_FLOAT, x.shape()));
              auto in = x.flat<float>();
              auto out = neg->flat<float>();
              for (size_t i = 0; i < out.size(); ++i) out[i] = -in[i];
              ctx.set_output(0, x);
              return OkStatus();
            })});
  Register({.type = "Negate",
            .shape_fn = [](InferenceContext& c) -> Status {
              CKFLOW_RETURN_IF_ERROR(FloatInputs(c));
              c.AddOutput(DT_FLOAT, c.input_shapes[0]);
              return OkStatus();
            },
            .kernel_factory = [this](const Node&) -> StatusOr<Kernel> {
              return Kernel([this](KernelContext& ctx) -> Status {
                const Tensor& x = ctx.input(0);
                CKFLOW_ASSIGN_OR_RETURN(
                    Tensor * out, ctx.ForwardInputOrAllocateOutput(0, 0, DT_FLOAT, x.shape()));
                const bool in_place = out->raw_data() == x.raw_data();
                auto in = x.flat<float>();
                auto o = out->flat<float>();
                for (size_t i = 0; i < o.size(); ++i) o[i] = -in[i];
                std::lock_guard<std::mutex> lock(mu_);
                log_.push_back(in_place ? "in place" : "new buffer");
                return OkStatus();
              });
            }});
  Register({.type = "Log",
            .stateful = true,
            .shape_fn = NoOutputs(),
            .kernel_factory = [this](const Node& n) -> StatusOr<Kernel> {
              CKFLOW_ASSIGN_OR_RETURN(std::string tag, n.attrs().Get<std::string>("tag"));
              return Kernel([this, tag](KernelContext&) {
                std::lock_guard<std::mutex> lock(mu_);
                log_.push_back(tag);
                return OkStatus();
              });
            }});
  Register({.type = "Hold",
            .stateful = true,
            .shape_fn = OneOutput(DT_FLOAT, PartialShape({2})),
            .kernel_factory = [this](const Node&) -> StatusOr<Kernel> {
              return Kernel([this](KernelContext& ctx) {
                ctx.set_output(0, held_);
                return OkStatus();
              });
            }});
  Register({.type = "LogHeld",
            .stateful = true,
            .shape_fn = NoOutputs(),
            .kernel_factory = [this](const Node&) -> StatusOr<Kernel> {
              return Kernel([this](KernelContext&) {
                std::lock_guard<std::mutex> lock(mu_);
                log_.push_back(held_.RefCountIsOne() ? "dropped" : "kept");
                return OkStatus();
              });
            }});
  Register({.type = "Fail",
            .shape_fn = OneOutput(DT_FLOAT, PartialShape::Scalar()),
            .kernel_factory = [](const Node& n) -> StatusOr<Kernel> {
              auto code = static_cast<StatusCode>(n.attrs().GetOr<int64_t>("code", 2));
              std::string message = n.attrs().GetOr<std::string>("message", "failed");
              return Kernel([code, message](KernelContext&) { return Status(code, message); });
            }});
  Register({.type = "Throw",
            .shape_fn = OneOutput(DT_FLOAT, PartialShape::Scalar()),
            .kernel_factory = [](const Node& n) -> StatusOr<Kernel> {
              bool bad_alloc = n.attrs().GetOr<bool>("bad_alloc", false);
              return Kernel([bad_alloc](KernelContext&) -> Status {
                if (bad_alloc) throw std::bad_alloc();
                throw std::runtime_error("kernel exploded");
              });
            }});
  Register({.type = "BadOutput",
            .shape_fn = OneOutput(DT_FLOAT, PartialShape({2})),
            .kernel_factory = [](const Node& n) -> StatusOr<Kernel> {
              std::string mode = n.attrs().GetOr<std::string>("mode", "");
              return Kernel([mode](KernelContext& ctx) {
                if (mode == "dtype") ctx.set_output(0, Tensor::FromVector<int32_t>({1, 2}));
                if (mode == "shape") ctx.set_output(0, Tensor::FromVector<float>({1, 2, 3}));
                return OkStatus();
              });
            }});
  Register({.type = "Rendezvous",
            .stateful = true,
            .shape_fn = OneOutput(DT_FLOAT, PartialShape::Scalar()),
            .kernel_factory = [this](const Node& n) -> StatusOr<Kernel> {
              auto parties = static_cast<int>(n.attrs().GetOr<int64_t>("parties", 2));
              return Kernel([this, parties](KernelContext& ctx) -> Status {
                std::unique_lock<std::mutex> lock(mu_);
                ++arrived_;
                arrived_cv_.notify_all();
                if (!arrived_cv_.wait_for(lock, kRendezvousTimeout,
                                          [&] { return arrived_ >= parties; })) {
                  return Status(StatusCode::kDeadlineExceeded,
                                internal::StrCat("only ", arrived_, " of ", parties,
                                                 " parties arrived: they did not run together"));
                }
                ctx.set_output(0, Tensor::Scalar(1.0f));
                return OkStatus();
              });
            }});
  Register({.type = "Count",
            .stateful = true,
            .shape_fn = OneOutput(DT_INT64, PartialShape::Scalar()),
            .kernel_factory = [](const Node& n) -> StatusOr<Kernel> {
              CKFLOW_ASSIGN_OR_RETURN(std::string name, n.attrs().Get<std::string>("name"));
              return Kernel([name](KernelContext& ctx) -> Status {
                CKFLOW_ASSIGN_OR_RETURN(std::shared_ptr<CounterResource> counter,
                                        ctx.resources().LookupOrCreate<CounterResource>(name, [] {
                                          return std::make_shared<CounterResource>();
                                        }));
                ctx.set_output(0, Tensor::Scalar<int64_t>(++counter->value));
                return OkStatus();
              });
            }});
  Register({.type = "FailIfNegative",
            .shape_fn = [](InferenceContext& c) -> Status {
              CKFLOW_RETURN_IF_ERROR(FloatInputs(c));
              c.AddOutput(DT_FLOAT, c.input_shapes[0]);
              return OkStatus();
            },
            .kernel_factory = StatelessKernel([](KernelContext& ctx) -> Status {
              const Tensor& x = ctx.input(0);
              if (x.NumElements() > 0 && x.flat<float>()[0] < 0) {
                return InvalidArgumentError("x[0] is negative: ", x.flat<float>()[0]);
              }
              ctx.set_output(0, x);
              return OkStatus();
            })});
}

void FakeOps::Register(OpDef def) {
  // Count factory calls, so tests can see kernels are made once per node.
  KernelFactory factory = std::move(def.kernel_factory);
  def.kernel_factory = [this, type = def.type, factory](const Node& n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++factory_calls_[type];
    }
    return factory(n);
  };
  Status s = registry_.Register(std::move(def));
  CKFLOW_CHECK(s.ok());
}

const OpDef& FakeOps::op(std::string_view type) const {
  const OpDef* def = registry_.Find(type);
  CKFLOW_CHECK(def != nullptr);
  return *def;
}

Output FakeOps::Build(const Scope& s, std::string_view type, std::vector<Output> inputs,
                      AttrMap attrs) const {
  return Output(s.AddNode(op(type), std::move(inputs), std::move(attrs)), 0);
}

Output FakeOps::Const(const Scope& s, const Tensor& value) const {
  AttrMap attrs;
  attrs.Set("value", value);
  return Build(s, "Const", {}, std::move(attrs));
}

Output FakeOps::Placeholder(const Scope& s, DataType dtype, PartialShape shape) const {
  AttrMap attrs;
  attrs.Set("dtype", dtype);
  attrs.Set("shape", std::move(shape));
  return Build(s, "Placeholder", {}, std::move(attrs));
}

Output FakeOps::Add(const Scope& s, Output a, Output b) const { return Build(s, "Add", {a, b}); }

Node* FakeOps::Split2(const Scope& s, Output x) const { return Build(s, "Split2", {x}).node(); }

Output FakeOps::Negate(const Scope& s, Output x) const { return Build(s, "Negate", {x}); }

Output FakeOps::Log(const Scope& s, const std::string& tag) const {
  AttrMap attrs;
  attrs.Set("tag", tag);
  return Build(s, "Log", {}, std::move(attrs));
}

Output FakeOps::Fail(const Scope& s, StatusCode code, const std::string& message) const {
  AttrMap attrs;
  attrs.Set("code", static_cast<int64_t>(code));
  attrs.Set("message", message);
  return Build(s, "Fail", {}, std::move(attrs));
}

Output FakeOps::Throw(const Scope& s, bool bad_alloc) const {
  AttrMap attrs;
  attrs.Set("bad_alloc", bad_alloc);
  return Build(s, "Throw", {}, std::move(attrs));
}

Output FakeOps::BadOutput(const Scope& s, const std::string& mode) const {
  AttrMap attrs;
  attrs.Set("mode", mode);
  return Build(s, "BadOutput", {}, std::move(attrs));
}

Output FakeOps::Rendezvous(const Scope& s, int parties) const {
  AttrMap attrs;
  attrs.Set("parties", static_cast<int64_t>(parties));
  return Build(s, "Rendezvous", {}, std::move(attrs));
}

Output FakeOps::Count(const Scope& s, const std::string& name) const {
  AttrMap attrs;
  attrs.Set("name", name);
  return Build(s, "Count", {}, std::move(attrs));
}

Output FakeOps::FailIfNegative(const Scope& s, Output x) const {
  return Build(s, "FailIfNegative", {x});
}

Output FakeOps::Hold(const Scope& s) const { return Build(s, "Hold", {}); }

Output FakeOps::LogHeld(const Scope& s) const { return Build(s, "LogHeld", {}); }

std::vector<std::string> FakeOps::log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

int FakeOps::factory_calls(const std::string& type) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = factory_calls_.find(type);
  return it == factory_calls_.end() ? 0 : it->second;
}

}  // namespace ckflow::testing

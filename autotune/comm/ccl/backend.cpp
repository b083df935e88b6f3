// A c10d backend named "ccl" over the oneCCL runtime from PyPI (oneccl-cpu), for CPU tensors.
//
// Why it exists: Intel's bindings (oneccl_bind_pt) are not on PyPI and stop at torch 2.8; the
// runtime is on PyPI and exports only the C++ v1 API, so a little C++ is compiled once per torch
// (autotune/comm/ccl/build.py) and registered with torch.distributed.Backend.register_backend.
//
// Asynchrony: every collective is queued to one progress thread per process group, which starts
// it on the communicator and polls its event, so the caller (DDP's autograd hooks) goes on
// computing while the bucket is reduced. Only that thread touches the communicator: oneCCL does
// not promise that one communicator may be driven from two threads at once.
//
// Timeouts: the progress thread gives each collective the group's timeout (or the op's own).
// oneCCL has no deadline of its own: a peer that died leaves the event pending for ever, so the
// thread fails the op's future with a clear error, marks the group broken, and fails every
// later op at once. A broken communicator is leaked, not destroyed: its destructor would wait
// for the dead peer.
//
// Exit: the progress thread must never touch Python once the interpreter is being torn down.
// Completing an op can: dropping the last C++ reference to a tensor made in Python takes the
// GIL (TensorImpl::decref_pyobject), and so do the Python callbacks on its future (`.then`). A
// thread that asks for the GIL during finalization is ended by Python with pthread_exit, whose
// unwinding through a noexcept destructor is std::terminate: SIGABRT at exit, seen with an
// all-reduce left unwaited by a script that then returned. So (1) finished ops are released on
// a caller's thread, never on the progress thread; (2) the op being run stays in the queue, not
// on the thread's stack, so nothing is released if the thread is ended; (3) `drain_all`, which
// autotune registers with atexit (before finalization, while Python is whole), waits with the
// GIL released until every group's queued ops are done, so their callbacks run and no op is
// left in flight when finalization starts.
#include <torch/extension.h>
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <oneapi/ccl.hpp>

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;
using Future = c10::ivalue::Future;

ccl::datatype ccl_type(at::ScalarType t) {
    switch (t) {
        case at::kFloat: return ccl::datatype::float32;
        case at::kDouble: return ccl::datatype::float64;
        case at::kBFloat16: return ccl::datatype::bfloat16;
        case at::kHalf: return ccl::datatype::float16;
        case at::kChar: return ccl::datatype::int8;
        case at::kByte: return ccl::datatype::uint8;
        case at::kShort: return ccl::datatype::int16;
        case at::kInt: return ccl::datatype::int32;
        case at::kLong: return ccl::datatype::int64;
        case at::kUInt16: return ccl::datatype::uint16;
        case at::kUInt32: return ccl::datatype::uint32;
        case at::kUInt64: return ccl::datatype::uint64;
        default: TORCH_CHECK(false, "ccl: dtype ", t, " is not supported (floating and integer types are)");
    }
}

// AVG is a SUM followed by a division on this side: oneCCL's own avg is not implemented for
// every datatype on CPU, and a division after the sum gives the same result gloo users compute.
ccl::reduction ccl_op(const c10d::ReduceOp& op) {
    switch (op) {
        case c10d::ReduceOp::SUM: return ccl::reduction::sum;
        case c10d::ReduceOp::AVG: return ccl::reduction::sum;
        case c10d::ReduceOp::PRODUCT: return ccl::reduction::prod;
        case c10d::ReduceOp::MIN: return ccl::reduction::min;
        case c10d::ReduceOp::MAX: return ccl::reduction::max;
        default: TORCH_CHECK(false, "ccl: reduce op ", (int)op, " is not supported (SUM, AVG, PRODUCT, MIN, MAX are)");
    }
}

void average(at::Tensor& t, int size) {
    if (at::isFloatingType(t.scalar_type())) t.div_(size);
    else t.div_(size, "trunc");   // integer AVG truncates, as integer division does in C
}

// After a reduction into `buf` (the tensor itself, or its contiguous copy): AVG's division,
// then the copy back into the caller's tensor when it was not contiguous.
std::function<void()> reduced(at::Tensor t, at::Tensor buf, bool avg, int size) {
    return [t, buf, avg, size]() mutable {
        if (avg) average(buf, size);
        if (!buf.is_same(t)) t.copy_(buf);
    };
}

// A result computed in `buf`, a contiguous copy of `t` (or `t` itself): copied back to `t`.
std::function<void()> copied_back(at::Tensor t, at::Tensor buf) {
    return [t, buf]() mutable { if (!buf.is_same(t)) t.copy_(buf); };
}

void check_cpu(const at::Tensor& t) {
    TORCH_CHECK(t.device().is_cpu(), "ccl: this backend reduces CPU tensors; got one on ", t.device());
    TORCH_CHECK(!t.is_sparse(), "ccl: sparse tensors are not supported");
}

// The one tensor of a single-tensor collective, checked, with the contiguous buffer oneCCL works
// in (the tensor itself when it already is one) and its oneCCL type.
struct One {
    at::Tensor t, buf;
    ccl::datatype type;
};

One one_tensor(std::vector<at::Tensor>& ts, const char* op) {
    TORCH_CHECK(ts.size() == 1, "ccl: one tensor per ", op);
    auto t = ts[0];
    check_cpu(t);
    return {t, t.contiguous(), ccl_type(t.scalar_type())};
}

// Surfaces in Python as torch.distributed.DistBackendError, as gloo's and nccl's failures do.
std::exception_ptr dist_error(const std::string& msg) {
    return std::make_exception_ptr(
        c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, (uint32_t)__LINE__}, msg));
}

c10::intrusive_ptr<Future> tensor_future() {
    return c10::make_intrusive<Future>(c10::ListType::create(c10::TensorType::get()));
}

class CclWork : public c10d::Work {
public:
    CclWork(c10::intrusive_ptr<Future> fut, std::vector<at::Tensor> result, c10d::OpType type)
            : c10d::Work(-1, type), fut_(std::move(fut)), result_(std::move(result)) {}

    bool isCompleted() override { return fut_->completed(); }
    bool isSuccess() const override { return fut_->completed() && !fut_->hasError(); }
    std::exception_ptr exception() const override { return fut_->exception_ptr(); }
    std::vector<at::Tensor> result() override { return result_; }
    c10::intrusive_ptr<Future> getFuture() override { return fut_; }

    bool wait(std::chrono::milliseconds timeout) override {
        if (timeout == kNoTimeout) {
            fut_->wait();
        } else {
            auto until = Clock::now() + timeout;
            while (!fut_->completed()) {
                TORCH_CHECK(Clock::now() < until, "ccl: wait() timed out after ", timeout.count(), " ms");
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
        }
        if (fut_->hasError()) std::rethrow_exception(fut_->exception_ptr());
        return true;
    }

private:
    c10::intrusive_ptr<Future> fut_;
    std::vector<at::Tensor> result_;
};

// One queued collective: how to start it, what to do after it (copy-out, AVG), and its future.
struct Op {
    std::string name;
    std::function<ccl::event(ccl::communicator&)> start;
    std::function<void()> finish;
    c10::intrusive_ptr<Future> fut;
    std::vector<at::Tensor> result;
    std::chrono::milliseconds timeout;
};

} // namespace

class CclBackend;

namespace {

// Every live group of this process, for drain_all: added by the constructor, removed by the
// destructor. Raw pointers, not weak_intrusive_ptr: a c10 weak reference defers the destructor,
// and with it the communicator's, to its own release, which for a static registry is exit(),
// after oneCCL's globals are gone (SIGSEGV in atl_ofi::finalize). Never freed, so that a group
// destroyed during exit() still finds them.
std::mutex& groups_mu() { static auto* mu = new std::mutex; return *mu; }
std::vector<CclBackend*>& groups() { static auto* v = new std::vector<CclBackend*>; return *v; }

} // namespace

class CclBackend : public c10d::Backend {
public:
    CclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
               std::chrono::milliseconds timeout)
            : c10d::Backend(rank, size), timeout_(timeout) {
        static std::once_flag once;
        std::call_once(once, [] { ccl::init(); });
        // Rank 0 opens oneCCL's key-value service; the others learn its address through the
        // process group's own store, so no MPI or extra rendezvous is needed.
        std::shared_ptr<ccl::kvs> kvs;
        if (rank == 0) {
            kvs = ccl::create_main_kvs();
            auto a = kvs->get_address();
            store->set("autotune_ccl_kvs", std::vector<uint8_t>(a.begin(), a.end()));
        } else {
            auto v = store->get("autotune_ccl_kvs");
            TORCH_CHECK(v.size() == ccl::kvs::address_max_size, "ccl: bad key-value service address");
            ccl::kvs::address_type a;
            std::copy(v.begin(), v.end(), a.begin());
            kvs = ccl::create_kvs(a);
        }
        comm_ = std::make_unique<ccl::communicator>(ccl::create_communicator(size, rank, kvs));
        thread_ = std::thread([this] { progress(); });
        std::lock_guard<std::mutex> g(groups_mu());
        groups().push_back(this);
    }

    // Waits until every op queued so far has finished (completed, failed or timed out: each has a
    // deadline) and hands the finished ones over, for the caller to release. Called without the
    // GIL: their futures' callbacks take it.
    std::deque<Op> drain() {
        std::unique_lock<std::mutex> g(mu_);
        idle_.wait(g, [this] { return queue_.empty(); });
        std::deque<Op> finished;
        finished.swap(done_);
        return finished;
    }

    ~CclBackend() override {
        {
            std::lock_guard<std::mutex> g(groups_mu());
            groups().erase(std::remove(groups().begin(), groups().end(), this), groups().end());
        }
        {
            std::lock_guard<std::mutex> g(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
        done_.clear();
        if (broken_) (void)comm_.release();   // its destructor would wait for the dead peer
    }

    const std::string getBackendName() const override { return "ccl"; }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& ts,
                                             const c10d::AllreduceOptions& o) override {
        auto [t, buf, type] = one_tensor(ts, "allreduce");
        auto red = ccl_op(o.reduceOp);
        bool avg = o.reduceOp == c10d::ReduceOp::AVG;
        int size = getSize();
        return enqueue("allreduce", o.timeout, {t}, c10d::OpType::ALLREDUCE,
            [buf, type, red](ccl::communicator& c) {
                return ccl::allreduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), type, red, c);
            },
            reduced(t, buf, avg, size));
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& ts,
                                             const c10d::BroadcastOptions& o) override {
        auto [t, buf, type] = one_tensor(ts, "broadcast");
        int root = (int)o.rootRank;
        return enqueue("broadcast", o.timeout, {t}, c10d::OpType::BROADCAST,
            [buf, type, root](ccl::communicator& c) {
                return ccl::broadcast(buf.data_ptr(), buf.numel(), type, root, c);
            },
            copied_back(t, buf));
    }

    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& ts,
                                          const c10d::ReduceOptions& o) override {
        auto [t, buf, type] = one_tensor(ts, "reduce");
        auto red = ccl_op(o.reduceOp);
        bool avg = o.reduceOp == c10d::ReduceOp::AVG && (int)o.rootRank == getRank();
        int root = (int)o.rootRank, size = getSize();
        return enqueue("reduce", o.timeout, {t}, c10d::OpType::REDUCE,
            [buf, type, red, root](ccl::communicator& c) {
                return ccl::reduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), type, red, root, c);
            },
            reduced(t, buf, avg, size));
    }

    // all_gather into a list: gathered into one flat buffer, then copied to the list's tensors.
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outs,
                                             std::vector<at::Tensor>& ins,
                                             const c10d::AllgatherOptions& o) override {
        TORCH_CHECK(ins.size() == 1 && outs.size() == 1, "ccl: one tensor per allgather");
        TORCH_CHECK((int)outs[0].size() == getSize(), "ccl: allgather needs one output per rank");
        auto in = ins[0].contiguous();
        check_cpu(in);
        for (auto& out : outs[0]) {
            TORCH_CHECK(out.numel() == in.numel() && out.scalar_type() == in.scalar_type(),
                        "ccl: allgather outputs must match the input's size and dtype");
        }
        auto flat = at::empty({(int64_t)getSize(), in.numel()}, in.options());
        auto type = ccl_type(in.scalar_type());
        auto list = outs[0];
        return enqueue("allgather", o.timeout, list, c10d::OpType::ALLGATHER,
            [in, flat, type](ccl::communicator& c) {
                return ccl::allgather(in.data_ptr(), flat.data_ptr(), in.numel(), type, c);
            },
            [flat, list]() mutable {
                for (size_t r = 0; r < list.size(); ++r) list[r].copy_(flat[r].view_as(list[r]));
            });
    }

    // all_gather_into_tensor
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                   const c10d::AllgatherOptions& o) override {
        check_cpu(in);
        TORCH_CHECK(out.numel() == in.numel() * getSize(), "ccl: output must be world_size times the input");
        auto src = in.contiguous();
        auto dst = out.contiguous();
        auto type = ccl_type(in.scalar_type());
        return enqueue("allgather_into_tensor", o.timeout, {out}, c10d::OpType::_ALLGATHER_BASE,
            [src, dst, type](ccl::communicator& c) {
                return ccl::allgather(src.data_ptr(), dst.data_ptr(), src.numel(), type, c);
            },
            copied_back(out, dst));
    }

    // reduce_scatter from a list: the list is laid out flat, one slice per rank.
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outs,
                                                  std::vector<std::vector<at::Tensor>>& ins,
                                                  const c10d::ReduceScatterOptions& o) override {
        TORCH_CHECK(outs.size() == 1 && ins.size() == 1, "ccl: one tensor per reduce_scatter");
        TORCH_CHECK((int)ins[0].size() == getSize(), "ccl: reduce_scatter needs one input per rank");
        auto out = outs[0];
        check_cpu(out);
        std::vector<at::Tensor> flat_in;
        for (auto& t : ins[0]) flat_in.push_back(t.reshape({-1}));
        auto src = at::cat(flat_in);
        return scatter_reduced("reduce_scatter", o, src, out, c10d::OpType::REDUCE_SCATTER);
    }

    // reduce_scatter_tensor
    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                        const c10d::ReduceScatterOptions& o) override {
        check_cpu(in);
        TORCH_CHECK(in.numel() == out.numel() * getSize(), "ccl: input must be world_size times the output");
        return scatter_reduced("reduce_scatter_tensor", o, in.contiguous(), out,
                               c10d::OpType::_REDUCE_SCATTER_BASE);
    }

    // all_to_all_single, equal or uneven splits along dimension 0
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in,
                                                 std::vector<int64_t>& out_splits,
                                                 std::vector<int64_t>& in_splits,
                                                 const c10d::AllToAllOptions& o) override {
        check_cpu(in);
        auto src = in.contiguous();
        auto dst = out.contiguous();
        auto type = ccl_type(in.scalar_type());
        int size = getSize();
        if (out_splits.empty() && in_splits.empty()) {
            TORCH_CHECK(src.numel() % size == 0 && src.numel() == dst.numel(),
                        "ccl: all_to_all needs equal sizes divisible by the world size");
            size_t count = src.numel() / size;
            return enqueue("alltoall", o.timeout, {out}, c10d::OpType::ALLTOALL_BASE,
                [src, dst, type, count](ccl::communicator& c) {
                    return ccl::alltoall(src.data_ptr(), dst.data_ptr(), count, type, c);
                },
                copied_back(out, dst));
        }
        int64_t row_in = in.dim() ? src.numel() / std::max<int64_t>(1, in.size(0)) : 1;
        int64_t row_out = out.dim() ? dst.numel() / std::max<int64_t>(1, out.size(0)) : 1;
        std::vector<size_t> send(size), recv(size);
        for (int r = 0; r < size; ++r) {
            send[r] = (in_splits.empty() ? in.size(0) / size : in_splits[r]) * row_in;
            recv[r] = (out_splits.empty() ? out.size(0) / size : out_splits[r]) * row_out;
        }
        return enqueue("alltoallv", o.timeout, {out}, c10d::OpType::ALLTOALL_BASE,
            [src, dst, type, send, recv](ccl::communicator& c) {
                return ccl::alltoallv(src.data_ptr(), send, dst.data_ptr(), recv, type, c);
            },
            copied_back(out, dst));
    }

    // all_to_all over lists: equal shapes are packed, exchanged and unpacked.
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
                                            const c10d::AllToAllOptions& o) override {
        int size = getSize();
        TORCH_CHECK((int)outs.size() == size && (int)ins.size() == size, "ccl: all_to_all needs one tensor per rank");
        for (int r = 0; r < size; ++r) {
            check_cpu(ins[r]);
            TORCH_CHECK(ins[r].numel() == ins[0].numel() && outs[r].numel() == ins[0].numel(),
                        "ccl: all_to_all over lists needs tensors of one size (use all_to_all_single for uneven splits)");
        }
        std::vector<at::Tensor> flat_in;
        for (auto& t : ins) flat_in.push_back(t.reshape({-1}));
        auto src = at::cat(flat_in);
        auto dst = at::empty_like(src);
        auto type = ccl_type(src.scalar_type());
        size_t count = ins[0].numel();
        auto list = outs;
        return enqueue("alltoall", o.timeout, list, c10d::OpType::ALLTOALL,
            [src, dst, type, count](ccl::communicator& c) {
                return ccl::alltoall(src.data_ptr(), dst.data_ptr(), count, type, c);
            },
            [dst, list, count]() mutable {
                for (size_t r = 0; r < list.size(); ++r)
                    list[r].copy_(dst.narrow(0, r * count, count).view_as(list[r]));
            });
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override {
        return enqueue("barrier", o.timeout, {}, c10d::OpType::BARRIER,
                       [](ccl::communicator& c) { return ccl::barrier(c); }, [] {});
    }

    bool broken() const { return broken_; }

private:
    c10::intrusive_ptr<c10d::Work> scatter_reduced(const char* name, const c10d::ReduceScatterOptions& o,
                                                   at::Tensor src, at::Tensor out, c10d::OpType type_id) {
        auto dst = out.contiguous();
        auto type = ccl_type(src.scalar_type());
        auto red = ccl_op(o.reduceOp);
        bool avg = o.reduceOp == c10d::ReduceOp::AVG;
        int size = getSize();
        return enqueue(name, o.timeout, {out}, type_id,
            [src, dst, type, red](ccl::communicator& c) {
                return ccl::reduce_scatter(src.data_ptr(), dst.data_ptr(), dst.numel(), type, red, c);
            },
            reduced(out, dst, avg, size));
    }

    c10::intrusive_ptr<c10d::Work> enqueue(std::string name, std::chrono::milliseconds timeout,
                                           std::vector<at::Tensor> result, c10d::OpType type,
                                           std::function<ccl::event(ccl::communicator&)> start,
                                           std::function<void()> finish) {
        auto fut = tensor_future();
        auto work = c10::make_intrusive<CclWork>(fut, result, type);
        if (timeout == c10d::kUnsetTimeout) timeout = timeout_;
        std::deque<Op> finished;   // freed here, on the caller's thread, after the lock
        {
            std::lock_guard<std::mutex> g(mu_);
            finished.swap(done_);
            if (broken_) {
                fut->setError(dist_error("ccl: " + name + " refused: " + broken_reason_));
                return work;
            }
            queue_.push_back(Op{std::move(name), std::move(start), std::move(finish), fut,
                                std::move(result), timeout});
        }
        cv_.notify_one();
        return work;
    }

    // The op runs where it is, at the queue's front (a deque's push_back moves no element), and
    // only then moves to done_: this thread never owns an op's tensors, so neither finishing one
    // nor being ended by Python mid-op (a future's Python callback at exit) releases them here.
    // Finished ops are released by the next caller, drain() or the group's destructor.
    void progress() {
        for (;;) {
            Op* op;
            {
                std::unique_lock<std::mutex> g(mu_);
                cv_.wait(g, [this] { return stop_ || !queue_.empty(); });
                if (queue_.empty()) return;   // stop_ and nothing left
                op = &queue_.front();
            }
            run(*op);
            std::lock_guard<std::mutex> g(mu_);
            done_.push_back(std::move(queue_.front()));
            queue_.pop_front();
            if (queue_.empty()) idle_.notify_all();
        }
    }

    void run(Op& op) {
        if (broken_) {
            fail(op, dist_error("ccl: " + op.name + " refused: " + broken_reason_));
            return;
        }
        try {
            auto ev = op.start(*comm_);
            if (!await(ev, op)) return;
            op.finish();
            op.fut->markCompleted(c10::IValue(op.result));
        } catch (abi::__forced_unwind&) {
            // the thread is being ended (Python ends threads that touch it while it shuts down):
            // swallowing this would abort the process
            throw;
        } catch (...) {
            fail(op, std::current_exception());
        }
    }

    // Polls the event, yielding the core between polls as oneCCL's own wait() does, for up to
    // 50 ms (a 64 MB all-reduce on 2 cores); past that it sleeps in growing steps, so a rank
    // waiting for a slow or dead peer costs no core. False when the deadline passed.
    bool await(ccl::event& ev, Op& op) {
        auto begin = Clock::now();
        auto until = begin + op.timeout;
        auto nap = std::chrono::microseconds(20);
        for (int spins = 0; !ev.test(); ++spins) {
            auto now = Clock::now();
            if (now >= until) {
                std::string why = op.name + " timed out after " + std::to_string(op.timeout.count()) +
                    " ms on rank " + std::to_string(getRank()) + " of " + std::to_string(getSize()) +
                    ": a peer rank died or stopped calling collectives; this process group is unusable";
                {
                    std::lock_guard<std::mutex> g(mu_);
                    broken_ = true;
                    broken_reason_ = why;
                }
                fail(op, dist_error("ccl: " + why));
                // An unfinished event's destructor waits for it, that is for ever: leak it.
                (void)new ccl::event(std::move(ev));
                return false;
            }
            if (now - begin < std::chrono::milliseconds(50)) {
                std::this_thread::yield();
            } else {
                std::this_thread::sleep_for(nap);
                nap = std::min(nap * 2, std::chrono::microseconds(1000));
            }
        }
        return true;
    }

    static void fail(Op& op, std::exception_ptr e) {
        if (!op.fut->completed()) op.fut->setError(e);
    }

    std::chrono::milliseconds timeout_;
    std::unique_ptr<ccl::communicator> comm_;
    std::thread thread_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::condition_variable idle_;   // the queue became empty (drain)
    std::deque<Op> queue_;
    std::deque<Op> done_;
    bool stop_ = false;
    std::atomic<bool> broken_{false};
    std::string broken_reason_;
};

// Every op queued so far, in every group, done (completed, failed or timed out); the finished
// ops are released after the registry's lock, as dropping tensors may run Python.
void drain_all() {
    std::vector<std::deque<Op>> finished;
    std::lock_guard<std::mutex> g(groups_mu());   // a group being destroyed waits here meanwhile
    for (auto* group : groups()) finished.push_back(group->drain());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    py::object base = py::module::import("torch._C._distributed_c10d").attr("Backend");
    py::class_<CclBackend, c10d::Backend, c10::intrusive_ptr<CclBackend>>(m, "CclBackend")
        .def("broken", &CclBackend::broken);
    m.def("create",
          [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
             std::chrono::milliseconds timeout) -> c10::intrusive_ptr<c10d::Backend> {
              py::gil_scoped_release nogil;
              return c10::make_intrusive<CclBackend>(store, rank, size, timeout);
          },
          py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"));
    m.def("drain_all", &drain_all, py::call_guard<py::gil_scoped_release>(),
          "Wait until every ccl group's queued collectives are done and release them (at exit)");
    m.def("runtime_version", [] {
        auto v = ccl::get_library_version();
        return std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.update);
    });
}

#!/usr/bin/env python3
"""A real Open Inference Protocol (KServe v2) server on loopback, serving ONNX files through onnxruntime.

Prototype for issue 31 (the edge tier on existing serving engines). The engine is KServe's own
Python model server (`kserve.ModelServer`: FastAPI/uvicorn for REST, grpcio for gRPC) with a
custom `kserve.Model` that wraps an `onnxruntime.InferenceSession`. Nothing here speaks the
protocol by hand: the REST routes, the binary tensor extension, the gRPC service and the model
repository extension are KServe's.

    python scripts/oip_server.py --model-dir DIR --port 0 [--grpc-port 0] [--engine kserve]
    python scripts/oip_server.py --self-test

Install the engine first, in a venv of its own (it pulls in about 600 MB):

    python3 -m venv /tmp/oip
    /tmp/oip/bin/pip install --require-hashes -r scripts/oip_server_requirements.txt
    /tmp/oip/bin/python scripts/oip_server.py --self-test    # about 4 s; exit 0 when all checks pass

Models: every `NAME.onnx` in --model-dir is served as model `NAME`. The directory is polled
(every --poll seconds): a new file is loaded, a changed one reloaded, a removed one unloaded.
`POST /v2/repository/models/NAME/load` loads (or reloads) `DIR/NAME.onnx` at once, and
`.../unload` unloads it (while --poll is above 0 the directory wins: a file still there is loaded
again at the next scan, so use --poll 0 where only the API should decide).

Once REST and gRPC both accept connections, one line goes to stdout:

    listening on 127.0.0.1:HTTP_PORT grpc 127.0.0.1:GRPC_PORT

and nothing else is written to stdout (the engine's logs go to stderr). SIGTERM or SIGINT stops it.
Both listeners are bound to 127.0.0.1 only: KServe 0.21 hard-codes 0.0.0.0 and [::], so this script
wraps `RESTServer.__init__` and the gRPC module's `aio.server` (internals: recheck them when the
kserve pin moves; the self-test fails if the announcement or a port goes wrong).
"""
import argparse
import json
import os
import sys
import threading
import time

ENGINES = ("kserve",)

# onnxruntime element types -> Open Inference Protocol datatypes.
ORT_TO_OIP = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
    "tensor(string)": "BYTES",
}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--model-dir", help="directory of NAME.onnx files, each served as model NAME")
    p.add_argument("--port", type=int, default=0, help="REST port on 127.0.0.1 (0: any free one)")
    p.add_argument("--grpc-port", type=int, default=0, help="gRPC port on 127.0.0.1 (0: any free one)")
    p.add_argument("--engine", choices=ENGINES, default="kserve")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads per model")
    p.add_argument("--poll", type=float, default=0.5, help="seconds between scans of --model-dir (0: no scan)")
    p.add_argument("--self-test", action="store_true", help="start a server on a temporary model dir and check it")
    return p.parse_args(argv)


# ---------------------------------------------------------------- the server (KServe engine)

def serve_kserve(args, announce):
    # KServe parses sys.argv when imported (argparse.parse_known_args): give it nothing of ours.
    sys.argv = sys.argv[:1]
    import numpy as np
    import onnxruntime as ort
    import kserve
    from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer
    from kserve.errors import InvalidInput
    from kserve.model_repository import ModelRepository
    from kserve.protocol.grpc import server as kserve_grpc_server
    from kserve.protocol.rest import server as kserve_rest_server
    from kserve.utils.numpy_codec import from_np_dtype

    bound = {}

    # Bind REST to 127.0.0.1 (KServe hard-codes 0.0.0.0) and keep the uvicorn server to read its port.
    rest_init = kserve_rest_server.RESTServer.__init__

    def rest_init_loopback(self, *a, **kw):
        rest_init(self, *a, **kw)
        self.config.host = "127.0.0.1"
        bound["rest"] = self._server

    kserve_rest_server.RESTServer.__init__ = rest_init_loopback

    # Bind gRPC to 127.0.0.1 (KServe hard-codes [::]) and learn the port grpc picked for port 0.
    real_aio = kserve_grpc_server.aio

    class LoopbackAio:
        def __getattr__(self, name):
            return getattr(real_aio, name)

        @staticmethod
        def server(*a, **kw):
            srv = real_aio.server(*a, **kw)
            add = srv.add_insecure_port

            def add_loopback(addr):
                port = add("127.0.0.1:" + addr.rsplit(":", 1)[1])
                bound["grpc"] = port
                return port

            srv.add_insecure_port = add_loopback
            return srv

    kserve_grpc_server.aio = LoopbackAio()

    def dims(shape):
        return [d if isinstance(d, int) and d >= 0 else -1 for d in shape]

    class OnnxModel(Model):
        """One ONNX file run by onnxruntime on the CPU."""

        def __init__(self, name, path):
            super().__init__(name)
            self.path = path
            self.mtime = None
            self.sess = None

        def load(self):
            so = ort.SessionOptions()
            so.intra_op_num_threads = args.threads
            so.inter_op_num_threads = 1
            self.mtime = os.stat(self.path).st_mtime_ns
            self.sess = ort.InferenceSession(self.path, so, providers=["CPUExecutionProvider"])
            self.ready = True
            return True

        def get_input_types(self):
            return [{"name": i.name, "datatype": ORT_TO_OIP.get(i.type, i.type), "shape": dims(i.shape)}
                    for i in self.sess.get_inputs()]

        def get_output_types(self):
            return [{"name": o.name, "datatype": ORT_TO_OIP.get(o.type, o.type), "shape": dims(o.shape)}
                    for o in self.sess.get_outputs()]

        async def predict(self, payload: InferRequest, headers=None, response_headers=None):
            want = {i.name for i in self.sess.get_inputs()}
            feeds = {}
            for i in payload.inputs:
                if i.name not in want:
                    raise InvalidInput(f"unexpected input '{i.name}' for model '{self.name}' (inputs: {sorted(want)})")
                feeds[i.name] = i.as_numpy()
            missing = want - feeds.keys()
            if missing:
                raise InvalidInput(f"missing inputs {sorted(missing)} for model '{self.name}'")
            names = [o.name for o in self.sess.get_outputs()]
            try:
                outs = self.sess.run(names, feeds)
            except Exception as e:  # onnxruntime's shape and type errors are the client's
                raise InvalidInput(f"model '{self.name}': {e}")
            binary = payload.use_binary_outputs
            result = []
            for n, a in zip(names, outs):
                o = InferOutput(name=n, shape=list(a.shape), datatype=from_np_dtype(a.dtype))
                o.set_data_from_numpy(np.ascontiguousarray(a), binary_data=binary)
                result.append(o)
            # requested_outputs carries each output's "binary_data" parameter (the binary extension).
            return InferResponse(response_id=payload.id, model_name=self.name, infer_outputs=result,
                                 use_binary_outputs=binary, requested_outputs=payload.request_outputs)

    lock = threading.Lock()

    class OnnxDirRepository(ModelRepository):
        """KServe's model repository extension over a directory of NAME.onnx files."""

        def path(self, name):
            if not name or "/" in name or name.startswith("."):
                raise ValueError(f"bad model name {name!r}")
            return os.path.join(self.models_dir, name + ".onnx")

        def load(self, name):  # POST /v2/repository/models/{name}/load
            with lock:
                m = OnnxModel(name, self.path(name))
                m.load()
                old = self.models.get(name)
                self.update(m)
                if old is not None and old is not m:
                    old.ready = False
            return True

        def load_models(self):
            for f in sorted(os.listdir(self.models_dir)):
                if f.endswith(".onnx"):
                    self.load(f[:-5])

        def scan(self):
            """Load new files, reload changed ones, unload removed ones."""
            present = {}
            for f in os.listdir(self.models_dir):
                if f.endswith(".onnx") and not f.startswith("."):
                    try:
                        present[f[:-5]] = os.stat(os.path.join(self.models_dir, f)).st_mtime_ns
                    except FileNotFoundError:
                        pass
            for name, mtime in present.items():
                m = self.models.get(name)
                if m is None or getattr(m, "mtime", None) != mtime:
                    try:
                        self.load(name)
                        print(f"oip_server: loaded {name}", file=sys.stderr, flush=True)
                    except Exception as e:  # a file still being written: the next scan retries
                        print(f"oip_server: cannot load {name}: {e}", file=sys.stderr, flush=True)
            for name in list(self.models):
                if name not in present and isinstance(self.models[name], OnnxModel):
                    with lock:
                        self.models.pop(name, None)
                    print(f"oip_server: unloaded {name}", file=sys.stderr, flush=True)

    model_dir = os.path.abspath(args.model_dir)
    repo = OnnxDirRepository(model_dir)
    repo.load_models()

    def announce_when_ready():
        deadline = time.time() + 120
        while time.time() < deadline:
            srv = bound.get("rest")
            if srv is not None and srv.started and "grpc" in bound:
                port = srv.servers[0].sockets[0].getsockname()[1]
                announce(f"listening on 127.0.0.1:{port} grpc 127.0.0.1:{bound['grpc']}")
                break
            time.sleep(0.02)
        while args.poll > 0:
            time.sleep(args.poll)
            try:
                repo.scan()
            except Exception as e:
                print(f"oip_server: scan failed: {e}", file=sys.stderr, flush=True)

    threading.Thread(target=announce_when_ready, daemon=True).start()
    server = ModelServer(http_port=args.port, grpc_port=args.grpc_port, registered_models=repo,
                         enable_grpc=True, workers=1, enable_latency_logging=False)
    # ModelServer.start refuses an empty model list; a repository with no model yet is fine here.
    server._register_and_check_atleast_one_model_is_ready = lambda models: None
    server.start(list(repo.get_models().values()))


def run_server(args):
    if not args.model_dir or not os.path.isdir(args.model_dir):
        sys.exit("oip_server: --model-dir must name a directory")
    # Only the announcement goes to stdout: point fd 1 at stderr for everything else.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def announce(line):
        out.write(line + "\n")
        out.flush()

    serve_kserve(args, announce)


# ---------------------------------------------------------------- self-test

def make_mnist_like(path):
    """A small MNIST-shaped MLP (N x 1 x 28 x 28 -> N x 10), fixed seed, built with the onnx package."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(31)
    w1 = (rng.standard_normal((784, 64)) * 0.05).astype(np.float32)
    b1 = (rng.standard_normal(64) * 0.05).astype(np.float32)
    w2 = (rng.standard_normal((64, 10)) * 0.1).astype(np.float32)
    b2 = (rng.standard_normal(10) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Gemm", ["hr", "w2", "b2"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes, "mnist_like",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 1, 28, 28])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def self_test(args):
    import shutil
    import subprocess
    import tempfile
    import urllib.error
    import urllib.request

    import numpy as np
    import onnxruntime as ort

    failures = []

    def check(what, ok, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)
        if not ok:
            failures.append(what)

    def http(method, url, body=None, headers=None):
        req = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()

    tmp = tempfile.mkdtemp(prefix="oip-self-test-")
    proc = None
    try:
        model = os.path.join(tmp, "mnist_like.onnx")
        make_mnist_like(model)
        cmd = [sys.executable, os.path.abspath(__file__), "--model-dir", tmp, "--port", "0",
               "--grpc-port", "0", "--engine", args.engine, "--poll", "0.2"]
        t0 = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = proc.stdout.readline().strip()
        started = time.time() - t0
        check("announces its address", line.startswith("listening on 127.0.0.1:"), f"{line!r} after {started:.2f} s")
        if not line.startswith("listening on"):
            return 1
        parts = line.split()
        base = "http://" + parts[2]
        grpc_addr = parts[4]

        st, _, b = http("GET", base + "/v2/health/ready")
        check("GET /v2/health/ready", st == 200 and json.loads(b).get("ready") is True, b.decode())
        st, _, b = http("GET", base + "/v2/models/mnist_like")
        meta = json.loads(b) if st == 200 else {}
        check("GET /v2/models/mnist_like", st == 200 and meta["inputs"][0] == {"name": "input", "datatype": "FP32", "shape": [-1, 1, 28, 28]}, b.decode())

        x = np.random.default_rng(7).random((3, 1, 28, 28), dtype=np.float32)
        ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]

        # JSON tensors
        body = {"id": "self-test", "inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}
        st, _, b = http("POST", base + "/v2/models/mnist_like/infer", json.dumps(body).encode(), {"Content-Type": "application/json"})
        r = json.loads(b)
        out = r["outputs"][0] if st == 200 else {}
        y = np.asarray(out.get("data", []), dtype=np.float32).reshape(out.get("shape", [0]))
        check("REST JSON infer equals onnxruntime", st == 200 and r.get("id") == "self-test" and out.get("datatype") == "FP32"
              and y.shape == ref.shape and np.array_equal(y, ref), f"status {st}, shape {out.get('shape')}")

        # binary tensor extension, both ways
        header = json.dumps({"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32", "parameters": {"binary_data_size": x.nbytes}}],
                             "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
        st, h, b = http("POST", base + "/v2/models/mnist_like/infer", header + x.tobytes(),
                        {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(header))})
        n = int(h.get("inference-header-content-length", "0"))
        ok = st == 200 and n > 0
        if ok:
            j = json.loads(b[:n])
            y = np.frombuffer(b[n:], dtype=np.float32).reshape(j["outputs"][0]["shape"])
            ok = np.array_equal(y, ref)
        check("REST binary tensor extension equals onnxruntime", ok, f"status {st}, header length {n}")

        # errors come back as {"error": ...}
        st, _, b = http("POST", base + "/v2/models/nosuch/infer", json.dumps(body).encode(), {"Content-Type": "application/json"})
        check("unknown model: 404 {\"error\"}", st == 404 and "error" in json.loads(b), f"{st} {b.decode()[:120]}")
        bad = {"inputs": [{"name": "input", "shape": [1, 784], "datatype": "FP32", "data": [0.0] * 784}]}
        st, _, b = http("POST", base + "/v2/models/mnist_like/infer", json.dumps(bad).encode(), {"Content-Type": "application/json"})
        check("wrong shape: 400 {\"error\"}", st == 400 and "error" in json.loads(b), f"{st} {b.decode()[:120]}")

        # gRPC (KServe ships the generated stubs of the protocol's proto)
        try:
            import grpc
            from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb
            from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc as pbg
            stub = pbg.GRPCInferenceServiceStub(grpc.insecure_channel(grpc_addr))
            req = pb.ModelInferRequest(model_name="mnist_like", id="g")
            t = req.inputs.add()
            t.name, t.datatype = "input", "FP32"
            t.shape.extend(x.shape)
            req.raw_input_contents.append(x.tobytes())
            resp = stub.ModelInfer(req, timeout=30)
            y = np.frombuffer(resp.raw_output_contents[0], dtype=np.float32).reshape(tuple(resp.outputs[0].shape))
            check("gRPC ModelInfer equals onnxruntime", np.array_equal(y, ref), f"{resp.outputs[0].datatype} {list(resp.outputs[0].shape)}")
        except ImportError as e:
            check("gRPC ModelInfer", False, f"no stubs: {e}")

        # the repository: a new file appears (picked up by the scan), and an explicit load
        shutil.copy(model, os.path.join(tmp, ".copy.tmp"))
        os.rename(os.path.join(tmp, ".copy.tmp"), os.path.join(tmp, "second.onnx"))
        deadline = time.time() + 20
        st = 0
        while time.time() < deadline:
            st, _, _ = http("GET", base + "/v2/models/second/ready")
            if st == 200:
                break
            time.sleep(0.1)
        check("a new file is served", st == 200)
        t = time.time()
        st, _, b = http("POST", base + "/v2/repository/models/second/load")
        check("POST /v2/repository/models/second/load", st == 200, f"{b.decode()} in {time.time() - t:.3f} s")
        st, _, b = http("POST", base + "/v2/repository/models/missing/load")
        check("loading a missing file fails with {\"error\"}", st >= 400 and "error" in json.loads(b), f"{st}")
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=35)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("self-test passed" if not failures else f"self-test failed: {', '.join(failures)}", flush=True)
    return 1 if failures else 0


def main():
    args = parse_args(sys.argv[1:])
    if args.self_test:
        sys.exit(self_test(args))
    run_server(args)


if __name__ == "__main__":
    main()

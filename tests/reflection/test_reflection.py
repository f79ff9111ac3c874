#!/usr/bin/python3
"""Server reflection on both daemons, used as grpcurl, grpcui and Postman use it.

Starts a host + gateway with deploy/local/run.sh (ephemeral loopback ports, a
temp run dir), then, knowing nothing of sandgate's API but the reflection
protocol (compiled at test time from Debian's grpc-proto, as a client would):
lists the services on v1 and v1alpha, resolves every method's request and
response types from the FileDescriptorProtos the server returns, builds
message classes from them, and makes CreateSandbox, RunCode and KillSandbox
calls with those classes only. Also: the host lists only its own API, the
gateway never describes the host's, unknown names get NOT_FOUND in the
stream, and dependencies are sent once per stream.

Env: SANDGATE_BUILD (build dir with bin/). Run with /usr/bin/python3.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import uuid

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tenancy"))
import sgtenancy as sg  # noqa: E402

REPO = sg.REPO
GRPC_PROTO = "/usr/share/grpc-proto"
DEMO_KEY = "sg-demo-key-0001"
S = {}


def setUpModule():
    S["tmp"] = tmp = tempfile.mkdtemp(prefix="sandgate-refl-")
    unittest.addModuleCleanup(shutil.rmtree, tmp, ignore_errors=True)
    # The reflection protocol's own stubs, generated as any client would.
    out = os.path.join(tmp, "stubs")
    os.makedirs(out)
    for ver in ("v1", "v1alpha"):
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", GRPC_PROTO,
                        "--python_out=" + out,
                        "grpc/reflection/%s/reflection.proto" % ver], check=True, timeout=60)
    import importlib.util
    for ver in ("v1", "v1alpha"):  # by path: "grpc" is the installed package's name
        path = os.path.join(out, "grpc", "reflection", ver, "reflection_pb2.py")
        spec = importlib.util.spec_from_file_location("reflection_%s_pb2" % ver, path)
        S["pb_" + ver] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(S["pb_" + ver])
    with open(os.path.join(REPO, "deploy", "local", "policy.yaml")) as f:
        d = sg.Daemons(tmp, f.read())
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["gateway"] = d.addr
    S["host"] = "127.0.0.1:" + d.read("host.port").strip()


class Reflector:
    """A reflection client: what grpcurl does before its first call."""

    def __init__(self, addr, version="v1"):
        mod = S["pb_" + version]
        self.pb = mod
        self.channel = grpc.insecure_channel(addr)
        self.stream = self.channel.stream_stream(
            "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % version,
            request_serializer=mod.ServerReflectionRequest.SerializeToString,
            response_deserializer=mod.ServerReflectionResponse.FromString)
        self.pool = descriptor_pool.DescriptorPool()
        self.files = {}

    def ask(self, *requests):
        """One stream, these requests in order; the responses."""
        return list(self.stream(iter(requests), timeout=10))

    def services(self):
        (resp,) = self.ask(self.pb.ServerReflectionRequest(list_services=""))
        return [s.name for s in resp.list_services_response.service]

    def _add(self, resp):
        if resp.HasField("error_response"):
            raise LookupError(resp.error_response.error_message)
        for raw in resp.file_descriptor_response.file_descriptor_proto:
            fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
            self.files.setdefault(fd.name, fd)

    def _load(self, name, done):
        if name in done:
            return
        fd = self.files[name]
        for dep in fd.dependency:
            self._load(dep, done)
        self.pool.Add(fd)
        done.add(name)

    def resolve(self, symbol):
        (resp,) = self.ask(self.pb.ServerReflectionRequest(file_containing_symbol=symbol))
        self._add(resp)
        done = set(getattr(self, "_done", set()))
        for name in list(self.files):
            self._load(name, done)
        self._done = done
        return self.pool.FindServiceByName(symbol)

    def message_class(self, full_name):
        desc = self.pool.FindMessageTypeByName(full_name)
        if hasattr(message_factory, "GetMessageClass"):   # protobuf >= 4
            return message_factory.GetMessageClass(desc)
        return message_factory.MessageFactory(self.pool).GetPrototype(desc)


class ReflectionTest(unittest.TestCase):
    def test_services_listed_on_both_versions(self):
        for ver in ("v1", "v1alpha"):
            got = set(Reflector(S["gateway"], ver).services())
            self.assertEqual(got, {"sandgate.v1.Sandboxes", "grpc.health.v1.Health",
                                   "grpc.reflection.v1.ServerReflection",
                                   "grpc.reflection.v1alpha.ServerReflection"}, ver)
        host = set(Reflector(S["host"]).services())
        self.assertIn("sandgate.v1.Host", host)
        self.assertNotIn("sandgate.v1.Sandboxes", host)

    def test_every_method_resolves(self):
        for addr in (S["gateway"], S["host"]):
            r = Reflector(addr)
            for svc_name in r.services():
                svc = r.resolve(svc_name)
                self.assertGreater(len(svc.methods), 0, svc_name)
                for m in svc.methods:
                    # both types are usable message classes
                    r.message_class(m.input_type.full_name)()
                    r.message_class(m.output_type.full_name)()

    def test_gateway_does_not_describe_the_host_api(self):
        r = Reflector(S["gateway"])
        with self.assertRaises(LookupError):
            r.resolve("sandgate.v1.Host")
        # the error details type is described, for clients decoding trailers
        (resp,) = r.ask(r.pb.ServerReflectionRequest(file_containing_symbol="sandgate.v1.ErrorInfo"))
        self.assertFalse(resp.HasField("error_response"))

    def test_errors_and_dependencies(self):
        r = Reflector(S["gateway"])
        pb = r.pb
        resps = r.ask(pb.ServerReflectionRequest(host="h", file_by_filename="no/such.proto"),
                      pb.ServerReflectionRequest(file_containing_symbol="no.Such"),
                      pb.ServerReflectionRequest(file_containing_extension=pb.ExtensionRequest(
                          containing_type="sandgate.v1.Sandbox", extension_number=5)),
                      pb.ServerReflectionRequest(all_extension_numbers_of_type="sandgate.v1.Sandbox"),
                      pb.ServerReflectionRequest(file_by_filename="sandgate/v1/sandgate.proto"))
        self.assertEqual(resps[0].valid_host, "h")
        self.assertEqual(resps[0].original_request.file_by_filename, "no/such.proto")
        for i in range(3):
            self.assertEqual(resps[i].error_response.error_code, grpc.StatusCode.NOT_FOUND.value[0])
            self.assertNotIn("no.Such", resps[i].error_response.error_message)
        self.assertEqual(resps[3].all_extension_numbers_response.base_type_name,
                         "sandgate.v1.Sandbox")
        names = [descriptor_pb2.FileDescriptorProto.FromString(b).name
                 for b in resps[4].file_descriptor_response.file_descriptor_proto]
        self.assertEqual(names, ["sandgate/v1/sandgate.proto"])
        # host.proto imports sandgate.proto: sent with it the first time only
        h = Reflector(S["host"])
        first, second = h.ask(pb.ServerReflectionRequest(file_containing_symbol="sandgate.v1.Host"),
                              pb.ServerReflectionRequest(file_by_filename="sandgate/v1/host.proto"))
        files = lambda r: [descriptor_pb2.FileDescriptorProto.FromString(b).name
                           for b in r.file_descriptor_response.file_descriptor_proto]
        self.assertEqual(files(first), ["sandgate/v1/host.proto", "sandgate/v1/sandgate.proto"])
        self.assertEqual(files(second), ["sandgate/v1/host.proto"])

    def test_bad_request_bytes_end_the_stream_cleanly(self):
        ch = grpc.insecure_channel(S["gateway"])
        raw = ch.stream_stream("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
        with self.assertRaises(grpc.RpcError) as cm:
            list(raw(iter([b"\xff\xff\xff"]), timeout=10))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        # the server is still serving
        self.assertIn("sandgate.v1.Sandboxes", Reflector(S["gateway"]).services())

    def test_calls_made_only_from_reflection(self):
        r = Reflector(S["gateway"])
        svc = r.resolve("sandgate.v1.Sandboxes")
        md = (("authorization", "Bearer " + DEMO_KEY),)

        def call(method_name, **fields):
            m = svc.methods_by_name[method_name]
            req_cls = r.message_class(m.input_type.full_name)
            resp_cls = r.message_class(m.output_type.full_name)
            path = "/%s/%s" % (svc.full_name, m.name)
            if m.server_streaming:
                fn = r.channel.unary_stream(path, request_serializer=req_cls.SerializeToString,
                                            response_deserializer=resp_cls.FromString)
                return list(fn(req_cls(**fields), metadata=md, timeout=30))
            fn = r.channel.unary_unary(path, request_serializer=req_cls.SerializeToString,
                                       response_deserializer=resp_cls.FromString)
            return fn(req_cls(**fields), metadata=md, timeout=30)

        sb = call("CreateSandbox", template="code-interpreter", user_id="refl-user",
                  task_id="refl-" + uuid.uuid4().hex[:8])
        self.assertTrue(sb.sandbox_id)
        try:
            events = call("RunCode", sandbox_id=sb.sandbox_id, user_id="refl-user",
                          code="x = 20\nprint(x + 1)\nx * 2")
            text = "".join(str(e) for e in events)
            self.assertIn("21", text)
            self.assertIn("40", text)
        finally:
            call("KillSandbox", sandbox_id=sb.sandbox_id, user_id="refl-user")


if __name__ == "__main__":
    unittest.main(verbosity=2)

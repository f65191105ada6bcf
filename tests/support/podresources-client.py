#!/usr/bin/python3
"""A client of kubelet's pod resources API (podresources/v1, D4) for Outpost's tests, as
monitoring agents are written: Python's grpcio, with stubs generated from the
repository's proto file by grpc_tools when it runs (Debian's python3-grpcio and
python3-grpc-tools).

    podresources-client.py PROTO_DIR SOCKET list
    podresources-client.py PROTO_DIR SOCKET allocatable
    podresources-client.py PROTO_DIR SOCKET get NAMESPACE NAME

PROTO_DIR holds podresources/v1/api.proto. The answer is printed as JSON with the
proto's field names (fields at their default value left out, as protobuf's JSON does);
a call that fails prints {"error": {"code": "UNKNOWN", "details": "..."}}. The exit
status is 0 either way, 2 for a bad command line.
"""

import importlib
import json
import sys
import tempfile

import grpc
from google.protobuf import json_format
from grpc_tools import protoc


def stubs(proto_dir, out_dir):
    """Generates the podresources/v1 stubs into out_dir and imports them."""
    args = [
        "protoc",
        "-I" + proto_dir,
        "--python_out=" + out_dir,
        "--grpc_python_out=" + out_dir,
        "podresources/v1/api.proto",
    ]
    if protoc.main(args) != 0:
        raise SystemExit("cannot generate the podresources/v1 stubs from " + proto_dir)
    sys.path.insert(0, out_dir)
    return (
        importlib.import_module("podresources.v1.api_pb2"),
        importlib.import_module("podresources.v1.api_pb2_grpc"),
    )


def call(api, grpc_api, socket, method, rest):
    with grpc.insecure_channel("unix://" + socket) as channel:
        lister = grpc_api.PodResourcesListerStub(channel)
        if method == "list" and not rest:
            return lister.List(api.ListPodResourcesRequest(), timeout=30)
        if method == "allocatable" and not rest:
            return lister.GetAllocatableResources(api.AllocatableResourcesRequest(), timeout=30)
        if method == "get" and len(rest) == 2:
            request = api.GetPodResourcesRequest(pod_namespace=rest[0], pod_name=rest[1])
            return lister.Get(request, timeout=30)
    print(__doc__, file=sys.stderr)
    raise SystemExit(2)


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    proto_dir, socket, method, rest = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    with tempfile.TemporaryDirectory() as out_dir:
        api, grpc_api = stubs(proto_dir, out_dir)
        try:
            answer = call(api, grpc_api, socket, method, rest)
        except grpc.RpcError as error:
            print(json.dumps({"error": {"code": error.code().name, "details": error.details()}}))
            return 0
    print(json_format.MessageToJson(answer, preserving_proto_field_name=True, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""rdmad.v1: the messages (rdmad_pb2) and gRPC stubs (rdmad_pb2_grpc) generated from proto/rdmad/v1/rdmad.proto."""

/** transport: msgpack frames over ZeroMQ (ROUTER/DEALER), request/reply, CURVE. */
export * from "./codec.ts";
export * from "./curve.ts";
export * from "./pendingRequests.ts";
export * from "./zmqNode.ts";

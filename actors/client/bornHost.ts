/**
 * The bornHost a producer stamps on what it sends: RocketMQ records the sending connection's remote
 * address there. A ZeroMQ ROUTER does not tell the broker where a frame came from, so the client
 * names itself: its first non-internal IPv4 address (RocketMQ's RemotingUtil.getLocalAddress picks
 * one the same way), else 127.0.0.1; port 0, as it does not listen.
 */
import { localIPv4 } from "../../transport/messageRecord.ts";

let cached: string | undefined;

/** `ip:0` of this host (computed once per process). */
export function bornHostOfThisProcess(): string {
  cached ??= `${localIPv4()}:0`;
  return cached;
}

/**
 * Failing an ask early when its peer cannot be reached. An ask to a peer whose connection is
 * refused or lost sits queued, unsent, until its timeout; RocketMQ's remoting fails a request on a
 * connection that cannot be made at once, so a client turns to the next name server and a broker
 * is done with a name server that is down instead of waiting out the request timeout there.
 */
import { MQError } from "../../transport/protocol.ts";
import type { ActorNode } from "./actorNode.ts";
import type { AskOptions, Reply, WireEvent } from "./refs.ts";

/**
 * `ask`, or a TIMEOUT as soon as the connection of `node` to `address` reads refused or lost
 * ({@link ActorNode.peerUnreachable}), now or at its next loss ({@link ActorNode.onPeerFailure}). The
 * ask itself is left to time out, unheard. With `since` ({@link monotonicNow} ms), only a connection
 * that closed or failed to be made at or after it counts ({@link ActorNode.peerFailedSince}): a peer
 * that restarted, whose link reads lost until ZeroMQ's next reconnect, gets the ask. A peer that
 * refused the handshake fails it with the refusal (AUTH_FAILED and why), not TIMEOUT.
 */
export function unlessConnectionLost<R>(
  node: Pick<ActorNode, "peerUnreachable" | "peerFailedSince" | "peerRefusal" | "onPeerFailure">,
  address: string,
  ask: Promise<R>,
  since?: number,
): Promise<R> {
  const lost = () => new MQError("TIMEOUT", "its connection was refused or lost");
  if (since === undefined ? node.peerUnreachable(address) : node.peerFailedSince(address, since)) {
    ask.catch(() => {});
    // refused (and not tried again since): AUTH_FAILED with why, as the ask itself fails
    return Promise.reject(node.peerRefusal(address) ?? lost());
  }
  return new Promise<R>((resolve, reject) => {
    const stop = node.onPeerFailure(address, (reason) => {
      stop();
      ask.catch(() => {});
      // a refused handshake says why (AUTH_FAILED), a lost connection only that it is lost
      reject(reason ?? lost());
    });
    ask.then(
      (r) => {
        stop();
        resolve(r);
      },
      (e) => {
        stop();
        reject(e);
      },
    );
  });
}

/**
 * `node.ref(address, actor).ask(event, opts)` through {@link unlessConnectionLost}. The ask is made
 * before the wait begins, so a loss while it waits is heard; a ref() that throws (an address that
 * is not an endpoint) rejects instead.
 */
export function askUnlessConnectionLost<T>(
  node: Pick<ActorNode, "ref" | "peerUnreachable" | "peerFailedSince" | "peerRefusal" | "onPeerFailure">,
  address: string,
  actor: string,
  event: WireEvent,
  opts: AskOptions,
  since?: number,
): Promise<Reply<T>> {
  let ask: Promise<Reply<T>>;
  try {
    ask = node.ref(address, actor).ask<T>(event, opts);
  } catch (e) {
    return Promise.reject(e);
  }
  return unlessConnectionLost(node, address, ask, since);
}

/**
 * `actormq broker-config get|set`: a running broker's configuration (RocketMQ's `mqadmin
 * getBrokerConfig` / `updateBrokerConfig`). `set` takes only the keys `get` marks settable.
 */
import type { Command } from "commander";
import { Admin } from "../../actors/client/index.ts";
import { clientCommand, clientOptions, formatTable, type JsonFlag, jsonOption, runClient, show } from "../common.ts";

interface ClientFlags extends JsonFlag {
  namesrv: string[];
}

const BROKER_ARG = "broker name (its master is asked) or address (tcp://host:port)";

export function addBrokerConfigCommands(program: Command): void {
  const cmd = program.command("broker-config").description("Show or change a running broker's configuration.");
  addBrokerConfigGetCommand(cmd);
  addBrokerConfigSetCommand(cmd);
}

/** `broker-config get <broker>`. */
function addBrokerConfigGetCommand(cmd: Command): void {
  clientCommand(
    cmd
      .command("get")
      .description("Show the options a broker runs with; SETTABLE marks those broker-config set changes while it runs.")
      .argument("<broker>", BROKER_ARG)
      .addOption(jsonOption("an object with brokerName, brokerAddr, brokerConfig (option name to value) and settableKeys")),
  ).action((broker: string, f: ClientFlags) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      show(f, await admin.brokerConfig(broker), (r) => {
        const settable = new Set(r.settableKeys);
        const rows = Object.entries(r.brokerConfig).map(([k, v]) => [
          k,
          Array.isArray(v) ? v.join(",") : String(v),
          settable.has(k) ? "yes" : "",
        ]);
        return `broker ${r.brokerName} (${r.brokerAddr})\n${formatTable(["KEY", "VALUE", "SETTABLE"], rows)}`;
      });
    }),
  );
}

/** `broker-config set <broker> <key> <value>`. */
function addBrokerConfigSetCommand(cmd: Command): void {
  clientCommand(
    cmd
      .command("set")
      .description(
        "Change a setting of a running broker; it is kept in the broker's config/broker.json for later starts (a start flag such as --broker-permission wins). " +
          "Settable: brokerPermission 6 (read and write), 4 (read only: drains the broker, producers move to other brokers, consumers still read it), 2 (write only).",
      )
      .argument("<broker>", BROKER_ARG)
      .argument("<key>", "setting, e.g. brokerPermission")
      .argument("<value>", "new value, e.g. 4"),
  ).action((broker: string, key: string, value: string, f: ClientFlags) =>
    runClient(async (onExit) => {
      const admin = await Admin.start(clientOptions(f));
      onExit(() => admin.close());
      const r = await admin.updateBrokerConfig(broker, { [key]: value });
      for (const [k, v] of Object.entries(r.updated))
        process.stdout.write(`broker ${broker}: ${k} ${r.previous[k] ?? "-"} -> ${v} (kept in its config/broker.json)\n`);
    }),
  );
}

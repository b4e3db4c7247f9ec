/**
 * Statechart drawing: lays a {@link StatechartGraph} out with elkjs (layered, nested states as
 * nested boxes) and renders it as a standalone SVG string. State boxes carry `data-state="<id>"`,
 * transitions `data-transition`, `data-source` and `data-event`, so the page lights the active
 * state and marks the last transition by toggling classes.
 */
import type { ElkExtendedEdge, ElkNode } from "elkjs/lib/elk-api.js";
import { type ChartState, MAX_CHART_STATES, MAX_CHART_TRANSITIONS, type StatechartGraph } from "./statechartGraph.ts";

/** A laid-out chart: the SVG plus what the page needs to light states. */
export interface RenderedChart {
  machineId: string;
  svg: string;
  /** state id -> dot path from the machine root (matches snapshot values) */
  states: { id: string; path: string }[];
  /** `label` is the edge's text, also shown by the page for the event that lit it */
  transitions: { id: string; source: string; targets: string[]; event: string; label: string }[];
}

const CHAR_W = 7;
const LINE_H = 16;
const PAD = 10;
const COMPOUND_TOP = 26;
const MARGIN = 8;

type Elk = { layout(g: ElkNode): Promise<ElkNode> };
// elkjs is 1.5 MB of script: loaded on the first chart, not by every process that imports actormq
let elk: Promise<Elk> | null = null;
function loadElk(): Promise<Elk> {
  elk ??= import("elkjs/lib/elk.bundled.js").then((m) => new (m.default as unknown as { new (): Elk })());
  return elk;
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function stateSize(s: ChartState): { width: number; height: number } {
  const lines = [s.key, ...s.invokes.map((i) => `invoke ${i}`)];
  const w = Math.max(...lines.map((l) => l.length)) * CHAR_W + 2 * PAD;
  return { width: Math.max(60, w), height: lines.length * LINE_H + 2 * PAD };
}

/** The ELK input graph for a statechart (exported for tests). */
export function toElkGraph(g: StatechartGraph): ElkNode {
  const nodes = new Map<string, ElkNode>();
  const root: ElkNode = {
    id: "__root",
    layoutOptions: {
      "elk.algorithm": "layered",
      "elk.direction": "DOWN",
      "elk.hierarchyHandling": "INCLUDE_CHILDREN",
      "elk.layered.spacing.nodeNodeBetweenLayers": "40",
      "elk.spacing.nodeNode": "30",
      "elk.spacing.edgeLabel": "4",
      "elk.edgeLabels.placement": "CENTER",
    },
    children: [],
    edges: [],
  };
  const children = new Set(g.states.flatMap((s) => (s.parent ? [s.parent] : [])));
  for (const s of g.states) {
    const n: ElkNode = { id: s.id, children: [] };
    if (children.has(s.id)) {
      const label = stateSize(s);
      n.layoutOptions = {
        "elk.padding": `[top=${COMPOUND_TOP + (label.height - LINE_H - 2 * PAD)},left=${PAD},bottom=${PAD},right=${PAD}]`,
        "elk.nodeSize.minimum": `(${label.width}, ${label.height})`,
        "elk.nodeSize.constraints": "MINIMUM_SIZE",
      };
    } else Object.assign(n, stateSize(s));
    nodes.set(s.id, n);
  }
  for (const s of g.states) {
    const parent = s.parent ? nodes.get(s.parent) : root;
    (parent ?? root).children!.push(nodes.get(s.id)!);
  }
  for (const t of g.transitions) {
    const e: ElkExtendedEdge = {
      id: t.id,
      sources: [t.source],
      targets: t.targets,
      labels: [{ text: t.label, width: t.label.length * CHAR_W + 6, height: LINE_H }],
    };
    root.edges!.push(e);
  }
  return root;
}

/** What is drawn instead of a machine too large to lay out: a note, no states to light. */
function tooLargeChart(g: StatechartGraph, found: { states: number; transitions: number }): RenderedChart {
  const count = (n: number, max: number, what: string) => `${n > max ? `more than ${max}` : n} ${what}`;
  const lines = [
    `The statechart of ${g.machineId} is too large to draw:`,
    `${count(found.states, MAX_CHART_STATES, "states")}, ${count(found.transitions, MAX_CHART_TRANSITIONS, "transitions")}`,
    `(drawn up to ${MAX_CHART_STATES} states and ${MAX_CHART_TRANSITIONS} transitions).`,
  ];
  const w = Math.max(...lines.map((l) => l.length)) * CHAR_W + 2 * PAD;
  const h = lines.length * LINE_H + 2 * PAD;
  const text = lines.map((l, i) => `<text x="${PAD}" y="${PAD + 12 + i * LINE_H}">${esc(l)}</text>`).join("");
  return {
    machineId: g.machineId,
    svg: `<svg xmlns="http://www.w3.org/2000/svg" class="statechart too-large" data-machine="${esc(g.machineId)}" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}"><style>${CHART_CSS}</style><rect x="0.5" y="0.5" width="${w - 1}" height="${h - 1}" rx="6" fill="#fff7ed" stroke="#ea580c"/>${text}</svg>`,
    states: [],
    transitions: [],
  };
}

/** Lays out and draws a statechart as a standalone SVG document; a note for one too large to lay out. */
export async function renderStatechart(g: StatechartGraph): Promise<RenderedChart> {
  if (g.tooLarge) return tooLargeChart(g, g.tooLarge);
  const laid = await (await loadElk()).layout(toElkGraph(g));
  const abs = new Map<string, { x: number; y: number; w: number; h: number }>();
  abs.set("__root", { x: 0, y: 0, w: laid.width ?? 0, h: laid.height ?? 0 });
  const place = (n: ElkNode, ox: number, oy: number) => {
    for (const c of n.children ?? []) {
      const x = ox + (c.x ?? 0);
      const y = oy + (c.y ?? 0);
      abs.set(c.id, { x, y, w: c.width ?? 0, h: c.height ?? 0 });
      place(c, x, y);
    }
  };
  place(laid, 0, 0);
  const byId = new Map(g.states.map((s) => [s.id, s]));
  const parts: string[] = [];
  const drawStates = (n: ElkNode) => {
    for (const c of n.children ?? []) {
      const s = byId.get(c.id)!;
      const b = abs.get(c.id)!;
      const compound = (c.children ?? []).length > 0;
      const cls = ["state", s.type, s.initial ? "initial" : "", compound ? "container" : ""].filter(Boolean).join(" ");
      const tx = compound ? b.x + PAD : b.x + b.w / 2;
      const anchor = compound ? "start" : "middle";
      const lines = [`<text class="state-name" x="${tx}" y="${b.y + PAD + 12}" text-anchor="${anchor}">${esc(s.key)}</text>`];
      for (const [i, inv] of s.invokes.entries()) {
        lines.push(
          `<text class="state-invoke" x="${tx}" y="${b.y + PAD + 12 + (i + 1) * LINE_H}" text-anchor="${anchor}">invoke ${esc(inv)}</text>`,
        );
      }
      parts.push(
        `<g class="${cls}" data-state="${esc(s.id)}"><title>${esc(s.id)}</title><rect x="${b.x}" y="${b.y}" width="${b.w}" height="${b.h}" rx="6"/>${lines.join("")}</g>`,
      );
      drawStates(c);
    }
  };
  drawStates(laid);
  const edges = (laid.edges ?? []) as (ElkExtendedEdge & { container?: string })[];
  const tById = new Map(g.transitions.map((t) => [t.id, t]));
  for (const e of edges) {
    const t = tById.get(e.id);
    if (!t) continue;
    const o = abs.get(e.container ?? "__root") ?? { x: 0, y: 0 };
    const d = (e.sections ?? [])
      .map((sec) => {
        const pts = [sec.startPoint, ...(sec.bendPoints ?? []), sec.endPoint];
        return pts.map((p, i) => `${i === 0 ? "M" : "L"}${(p.x + o.x).toFixed(1)},${(p.y + o.y).toFixed(1)}`).join(" ");
      })
      .join(" ");
    const label = (e.labels ?? [])[0];
    const labelSvg =
      label && label.x !== undefined
        ? `<text class="transition-label" x="${(label.x + o.x + 3).toFixed(1)}" y="${(label.y! + o.y + 12).toFixed(1)}">${esc(t.label)}</text>`
        : "";
    parts.push(
      `<g class="transition" data-transition="${t.id}" data-source="${esc(t.source)}" data-event="${esc(t.event)}"><path d="${d}" marker-end="url(#arrow)"/>${labelSvg}</g>`,
    );
  }
  const w = Math.ceil(laid.width ?? 0) + 2 * MARGIN;
  const h = Math.ceil(laid.height ?? 0) + 2 * MARGIN;
  const svg = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="statechart" data-machine="${esc(g.machineId)}" viewBox="${-MARGIN} ${-MARGIN} ${w} ${h}" width="${w}" height="${h}">`,
    `<style>${CHART_CSS}</style>`,
    `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>`,
    ...parts,
    "</svg>",
  ].join("");
  return {
    machineId: g.machineId,
    svg,
    states: g.states.map((s) => ({ id: s.id, path: s.path })),
    transitions: g.transitions.map((t) => ({ id: t.id, source: t.source, targets: t.targets, event: t.event, label: t.label })),
  };
}

/** Styles embedded in every chart so an exported SVG looks like the page. */
const CHART_CSS = [
  ".statechart{font:12px ui-monospace,Menlo,Consolas,monospace}",
  ".state rect{fill:#fff;stroke:#6b7280;stroke-width:1.2}",
  ".state.container>rect{fill:#f8fafc}",
  ".state.final rect{stroke-width:3;stroke-dasharray:none}",
  ".state.initial>rect{stroke:#111827;stroke-width:2}",
  ".state.active>rect{fill:#dcfce7;stroke:#16a34a;stroke-width:2.5}",
  ".state.active:not(.container)>rect{fill:#86efac}",
  ".state-invoke{fill:#6b7280;font-size:10px}",
  ".transition path{fill:none;stroke:#555;stroke-width:1.2}",
  ".transition-label{fill:#374151;font-size:10px}",
  ".transition.last path{stroke:#dc2626;stroke-width:2.5}",
  ".transition.last .transition-label{fill:#dc2626;font-weight:bold}",
].join("");

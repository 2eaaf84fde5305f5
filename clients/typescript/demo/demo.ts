// The demo page: the demo widgets from the bundled snapshot at once, kept live with
// `updates()`, and a form that writes offline (pushed with the demo's client key).
// Served beside the API: see clients/typescript/README.md, "The demo page".

import { Replica, type RecordObject } from "../src/index.js";

const parameters = new URLSearchParams(location.search);
const serverURL = parameters.get("api") ?? "http://127.0.0.1:8080/api";
const clientKey = parameters.get("key") ?? undefined;
const status = document.getElementById("status")!;
const rows = document.getElementById("widgets")!;

function render(widgets: RecordObject[]): void {
  rows.replaceChildren(
    ...widgets.map((widget) => {
      const row = document.createElement("tr");
      row.dataset["id"] = widget.id;
      for (const [value, kind] of [[widget.id, "id"], [widget["name"], "name"], [widget["color"], "color"], [widget["price"], "price"]] as const) {
        const cell = document.createElement("td");
        cell.className = kind;
        cell.textContent = value === undefined ? "" : String(value);
        row.append(cell);
      }
      return row;
    }),
  );
}

const snapshot = await (await fetch("../../../Snapshots/demo.snapshot")).arrayBuffer();
const replica = await Replica.open({ name: "deltasnap-demo", snapshot, serverURL, ...(clientKey ? { clientKey } : {}) });
replica.observe("widgets", { order: ["price"] }, render);
replica.observeStatus((now) => {
  const when = now.lastSync ? `synced ${now.lastSync.toLocaleTimeString()}` : "from the bundled snapshot";
  status.textContent = `${now.phase}, ${when}${now.pending ? `, ${now.pending} to push` : ""}${now.lastError ? ` (${now.lastError.message})` : ""}`;
});

document.getElementById("add")!.addEventListener("submit", (event) => {
  event.preventDefault();
  const form = new FormData(event.target as HTMLFormElement);
  const id = `web-${Date.now().toString(36)}`;
  void replica.put("widgets", { id, name: String(form.get("name")), color: "white", price: Number(form.get("price")) }).then(() => replica.sync().catch(() => undefined));
  (event.target as HTMLFormElement).reset();
});

try {
  for await (const _ of replica.updates({ wait: 25 })) {
    // Each sync's changes reach the table through the live query above.
  }
} catch (error) {
  status.textContent = `stopped: ${(error as Error).message}`;
}

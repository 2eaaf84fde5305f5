extension ConsoleAssets {
    /// The console's script: fills each page from the console's JSON (written from Assets/console.js by Scripts/console-assets.sh: edit that file).
    static let scriptText = ##"""
        // The DeltaSnapshot console's script: fills each page from the console's JSON (/console/api/…).
        // Text goes into the page as text (textContent), never as markup; no eval, no inline handlers.
        "use strict";

        const csrf = () => document.querySelector('meta[name="csrf-token"]')?.content ?? "";
        const params = new URLSearchParams(location.search);

        /** An element with attributes (class, href, …; `on…` functions become listeners) and children. */
        function el(tag, attributes = {}, ...children) {
          const node = document.createElement(tag);
          for (const [name, value] of Object.entries(attributes)) {
            if (value === undefined || value === null || value === false) continue;
            if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
            else if (name === "text") node.textContent = String(value);
            else node.setAttribute(name, value === true ? "" : String(value));
          }
          for (const child of children.flat(Infinity)) {
            if (child === undefined || child === null) continue;
            node.append(child instanceof Node ? child : document.createTextNode(String(child)));
          }
          return node;
        }

        /** Calls the console's JSON API; a lost session goes back to the sign-in page. */
        async function api(path, { method = "GET", body, json = true } = {}) {
          const headers = { Accept: "application/json" };
          if (method !== "GET") headers["X-CSRF-Token"] = csrf();
          if (body !== undefined && json) headers["Content-Type"] = "application/json";
          const response = await fetch(path, { method, headers, credentials: "same-origin", body: body === undefined ? undefined : json ? JSON.stringify(body) : body });
          const value = await response.json().catch(() => ({}));
          if (response.status === 401 && value.type === "urn:deltasnap:problem:console-sign-in-required") {
            location.assign("/console/sign-in");
            throw new Error("signed out");
          }
          if (!response.ok) {
            const error = new Error(value.detail ?? `${response.status} ${response.statusText}`);
            error.problem = value;
            throw error;
          }
          return value;
        }

        const number = (value) => (value === null || value === undefined ? "–" : Number(value).toLocaleString("en-US"));
        const bytes = (value) => {
          const units = ["B", "KB", "MB", "GB", "TB"];
          let amount = Number(value);
          let unit = 0;
          while (amount >= 1024 && unit < units.length - 1) {
            amount /= 1024;
            unit += 1;
          }
          return `${unit === 0 ? amount : amount.toFixed(1)} ${units[unit]}`;
        };
        const time = (iso) => (iso ? new Date(iso).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC") : "–");
        const age = (iso) => {
          if (!iso) return "–";
          const seconds = Math.max(0, Math.round((Date.now() - new Date(iso).getTime()) / 1000));
          if (seconds < 120) return `${seconds} s ago`;
          if (seconds < 7200) return `${Math.round(seconds / 60)} min ago`;
          if (seconds < 172800) return `${Math.round(seconds / 3600)} h ago`;
          return `${Math.round(seconds / 86400)} days ago`;
        };
        const json = (value) => JSON.stringify(value, null, 2);
        /** A record's body on one line, or its preview when the server sent only that (a large body). */
        const shown = (item) => (item.body === null && item.preview !== undefined ? `${item.preview} (${bytes(item.bytes)})` : JSON.stringify(item.body));
        const recordLink = (collection, id) => el("a", { href: `/console/record?collection=${encodeURIComponent(collection)}&id=${encodeURIComponent(id)}`, text: id });
        const collectionLink = (collection) => el("a", { href: `/console/collection?collection=${encodeURIComponent(collection)}`, text: collection });

        /** A table: a header row and one row per item. */
        function table(headings, rows, attributes = {}) {
          return el("table", attributes, el("thead", {}, el("tr", {}, headings.map((heading) => el("th", { text: heading })))), el("tbody", {}, rows));
        }
        const row = (...cells) => el("tr", {}, cells.map((cell) => el("td", {}, cell)));

        /** Facts as a definition list. */
        const facts = (pairs, attributes = {}) => el("dl", attributes, pairs.map(([term, value]) => [el("dt", { text: term }), el("dd", {}, value)]));

        /** Shows a failure in place of a section. */
        const failure = (error) => el("p", { class: "error", role: "alert", text: error.message });

        /** A button that asks for confirmation in the page before it acts. */
        function confirmed(label, question, act, attributes = {}) {
          const holder = el("span", { class: "confirm" });
          const button = el("button", {
            ...attributes,
            type: "button",
            onclick: () => {
              holder.replaceChildren(
                el("span", { class: "question", text: question }),
                el("button", { type: "button", class: "danger", "data-confirm": "yes", onclick: async () => { holder.replaceChildren(el("span", { class: "quiet", text: "Working…" })); await act(holder); } }, "Confirm"),
                el("button", { type: "button", onclick: () => holder.replaceChildren(button) }, "Cancel"),
              );
            },
          }, label);
          holder.append(button);
          return holder;
        }

        const main = document.getElementById("main");
        const pages = {};

        // Overview: the database, collections, this server's last hour, pushes, blobs, compaction.
        pages.overview = async () => {
          const render = async () => {
            const data = await api("/console/api/overview");
            const hour = data.traffic.hour;
            const share = hour.requests ? `${((100 * hour.notModified) / hour.requests).toFixed(1)} %` : "–";
            const chart = el("canvas", { id: "traffic-chart", width: 720, height: 160, "aria-label": "Requests per second and p99 latency, per minute, over the last hour" });
            main.replaceChildren(
              el("h1", { text: "Overview" }),
              el("section", {}, el("h2", { text: "Database" }), facts([
                ["Backend", data.database.backend],
                ["Database", data.database.id],
                ["Position", el("span", { id: "position", text: number(data.database.position) })],
                ["Last change", `${time(data.database.lastChange)} (${age(data.database.lastChange)})`],
                ["Compaction horizon", number(data.database.horizon)],
                ["Rules version", data.database.rulesVersion ? number(data.database.rulesVersion) : "none installed"],
              ])),
              el("section", {}, el("h2", { text: "Collections" }), table(
                ["Collection", "Visible", "Hidden", "Bytes", "Last position", "Last change"],
                data.collections.map((c) => el("tr", { "data-collection": c.name },
                  el("td", {}, collectionLink(c.name)), el("td", { class: "visible", text: number(c.visible) }), el("td", { class: "hidden", text: number(c.hidden) }),
                  el("td", { text: bytes(c.bytes) }), el("td", { text: number(c.lastPosition) }), el("td", { text: age(c.lastChange) }))),
                { id: "collections" })),
              el("section", {}, el("h2", { text: "This server, the last hour" }), facts([
                ["Requests per second", el("span", { id: "requests-per-second", text: hour.perSecond })],
                ["Answered 304", share],
                ["Latency p50 / p99", `${hour.p50 ?? "–"} / ${hour.p99 ?? "–"} ms`],
              ]), chart, el("p", { class: "legend" }, el("span", { class: "key bars" }), " requests per second, ", el("span", { class: "key line" }), " p99 latency (ms), per minute")),
              el("section", {}, el("h2", { text: "Pushes since this server started" }), facts(Object.entries(data.pushes).map(([status, count]) => [status, number(count)]), { id: "pushes" })),
              el("section", {}, el("h2", { text: "Blobs" }), facts([["Stored", number(data.blobs.count)], ["Bytes", bytes(data.blobs.bytes)]])),
              el("section", {}, el("h2", { text: "Baked snapshots compaction keeps" }), data.bakes.length === 0
                ? el("p", { class: "quiet", text: "No bake recorded." })
                : table(["Collection", "Token", "Position", "Baked", "Still valid"], data.bakes.map((b) => row(b.collection, el("code", { text: b.etag }), number(b.position), time(b.bakedAt), b.kept ? "yes" : "no (expired)")))),
            );
            draw(chart, data.traffic.minutes);
          };
          await render();
          setInterval(() => render().catch((error) => {
            document.getElementById("refresh-error")?.remove();
            main.prepend(el("p", { class: "error", role: "alert", id: "refresh-error", text: error.message }));
          }), 5000);
        };

        /** Draws requests per second as bars and p99 latency as a line. */
        function draw(canvas, minutes) {
          const context = canvas.getContext("2d");
          const { width, height } = canvas;
          context.clearRect(0, 0, width, height);
          const most = Math.max(1, ...minutes.map((m) => m.perSecond));
          const slowest = Math.max(1, ...minutes.map((m) => m.p99 ?? 0));
          const step = width / minutes.length;
          context.fillStyle = "#4c7bd9";
          minutes.forEach((m, index) => {
            const bar = (m.perSecond / most) * (height - 20);
            context.fillRect(index * step + 1, height - bar, Math.max(1, step - 2), bar);
          });
          context.strokeStyle = "#d9534c";
          context.lineWidth = 2;
          context.beginPath();
          let started = false;
          minutes.forEach((m, index) => {
            if (m.p99 === null) return;
            const y = height - (m.p99 / slowest) * (height - 20);
            const x = index * step + step / 2;
            if (started) context.lineTo(x, y);
            else context.moveTo(x, y);
            started = true;
          });
          context.stroke();
          context.fillStyle = "#555";
          context.font = "11px sans-serif";
          context.fillText(`${most.toFixed(1)}/s`, 4, 12);
          context.fillText(`${slowest} ms`, width - 60, 12);
        }

        // Collection: records in id order, filtered with the API's filter language; a snapshot to download.
        pages.collection = async () => {
          const collection = params.get("collection") ?? "";
          const filter = params.get("filter") ?? "";
          const after = params.get("after") ?? "";
          const query = new URLSearchParams({ collection, filter, after });
          main.replaceChildren(el("h1", {}, "Collection ", el("code", { text: collection })));
          const search = el("form", { method: "get", action: "/console/collection", class: "search" },
            el("input", { type: "hidden", name: "collection", value: collection }),
            el("label", { for: "filter", text: "Filter (as ?filter=)" }),
            el("input", { id: "filter", name: "filter", value: filter, placeholder: '{"color":{"eq":"red"}}', size: 60 }),
            el("button", { type: "submit" }, "Search"));
          const bake = el("form", { method: "post", action: "/console/snapshot", class: "bake" },
            el("input", { type: "hidden", name: "csrf", value: csrf() }),
            el("input", { type: "hidden", name: "collection", value: collection }),
            el("button", { type: "submit", id: "bake" }, "Download a snapshot (bake)"),
            el("span", { class: "quiet", text: " records its token, so compaction keeps it valid" }));
          main.append(search, bake);
          try {
            const data = await api(`/console/api/records?${query}`);
            main.append(
              el("p", { class: "quiet", id: "examined", text: `${data.records.length} shown, ${data.examined} examined` }),
              table(["Id", "Hidden", "Position", "Record"], data.records.map((r) => el("tr", { "data-id": r.id, class: r.hidden ? "is-hidden" : undefined },
                el("td", {}, recordLink(collection, r.id)), el("td", { text: r.hidden ? "hidden" : "" }), el("td", { text: number(r.position) }),
                el("td", {}, el("code", { class: "preview", text: shown(r) })))), { id: "records" }),
              data.next === null ? el("p", { class: "quiet", text: "End of the collection." })
                : el("p", {}, el("a", { id: "next", href: `/console/collection?${new URLSearchParams({ collection, filter, after: data.next })}`, text: "Next page" })),
            );
          } catch (error) {
            main.append(failure(error));
          }
        };

        // Record: its JSON, its versions with who pushed each, its blobs; hide or bring back.
        pages.record = async () => {
          const collection = params.get("collection") ?? "";
          const id = params.get("id") ?? "";
          main.replaceChildren(el("h1", {}, collectionLink(collection), " / ", el("code", { text: id })));
          let data;
          try {
            data = await api(`/console/api/record?${new URLSearchParams({ collection, id })}`);
          } catch (error) {
            main.append(failure(error));
            return;
          }
          const current = data.versions.find((v) => v.current);
          const outcome = el("p", { id: "action-outcome", class: "quiet" });
          const act = (hidden) => confirmed(hidden ? "Hide" : "Bring back", `${hidden ? "Hide" : "Bring back"} ${collection}/${id}? Apps receive the change in their next delta.`, async (holder) => {
            try {
              // The record the server answered for, not the page's address: they are the same record.
              const result = await api(`/console/api/record/${hidden ? "hide" : "unhide"}`, { method: "POST", body: { collection: data.collection, id: data.id } });
              outcome.textContent = result.committed ? `Done at position ${number(result.position)}.` : "Nothing to change.";
              setTimeout(() => location.reload(), 600);
            } catch (error) {
              holder.replaceChildren(failure(error));
            }
          }, { id: hidden ? "hide" : "unhide" });
          main.append(
            facts([["State", el("span", { id: "state", text: data.hidden ? "hidden (a tombstone)" : "visible" })], ["Position", number(current.position)], ["Changed", time(current.time)]]),
            el("div", { class: "actions" }, act(!data.hidden), outcome),
            el("h2", { text: "Current JSON" }), el("pre", { id: "record-json", text: current.body === null ? `${current.preview}\n(${bytes(current.bytes)}: the first kilobyte shown)` : json(current.body) }),
            el("h2", { text: "History" }),
            table(["Position", "Time", "Hidden", "User", "Client", "Mutation", "Record"], data.versions.map((v) => el("tr", { "data-position": v.position },
              el("td", { text: number(v.position) }), el("td", { text: time(v.time) }), el("td", { text: v.hidden ? "hidden" : "" }),
              el("td", { class: "user", text: v.push ? v.push.user ?? "(app key or owner)" : "–" }), el("td", { class: "client", text: v.push?.client ?? "–" }),
              el("td", { text: v.push ? `${v.push.mutation} (${v.push.operation})` : "–" }), el("td", {}, el("code", { class: "preview", text: shown(v) })))), { id: "history" }),
            el("h2", { text: "Blobs it references" }),
            data.blobs.length === 0 ? el("p", { class: "quiet", text: "None." }) : table(["SHA-256", "Size", "Type"], data.blobs.map((b) => row(el("code", { text: b.$blob }), bytes(b.size), b.type))),
          );
        };

        // Users: what one user reads and may write, and why.
        pages.users = async () => {
          const claims = el("textarea", { id: "claims", rows: 3, cols: 60, placeholder: '{"sub":"ada","teams":["red"]}' });
          const token = el("textarea", { id: "token", rows: 3, cols: 60, placeholder: "or paste a token (verified as the API verifies it)" });
          const collection = el("input", { id: "explain-collection", placeholder: "collection" });
          const id = el("input", { id: "explain-id", placeholder: "record id" });
          const results = el("div", { id: "user-results" });
          const form = el("form", { class: "user", onsubmit: async (event) => {
            event.preventDefault();
            results.replaceChildren(el("p", { class: "quiet", text: "Reading as the user…" }));
            try {
              const body = token.value.trim() ? { token: token.value.trim() } : { claims: JSON.parse(claims.value || "{}") };
              if (collection.value && id.value) Object.assign(body, { collection: collection.value, id: id.value });
              const data = await api("/console/api/users/check", { method: "POST", body });
              results.replaceChildren(
                el("h2", {}, "As ", el("code", { id: "subject", text: data.subject })),
                table(["Collection", "Reads", "Rows read (first 20, by id)", "Create", "Update", "Delete"], data.collections.map((c) => el("tr", { "data-collection": c.name },
                  el("td", {}, collectionLink(c.name)), el("td", { text: c.read }),
                  el("td", { class: "rows" }, c.rows.ids ? (c.rows.ids.length === 0 ? "none" : [c.rows.ids.map((rowID, index) => [index ? ", " : "", recordLink(c.name, rowID)]), c.rows.more ? " …" : ""]) : `${c.rows.status}: ${c.rows.error}`),
                  el("td", { text: c.create }), el("td", { text: c.update }), el("td", { text: c.delete }))), { id: "user-collections" }),
                data.explanation ? el("section", { id: "explanation" }, el("h2", {}, "Why, for ", el("code", { text: `${data.explanation.collection}/${data.explanation.id}` }), ` (${data.explanation.state})`),
                  el("ul", {}, data.explanation.lines.map((line) => el("li", { "data-operation": line.operation }, el("strong", { text: `${line.operation}: ` }), line.reason)))) : "",
              );
            } catch (error) {
              results.replaceChildren(failure(error));
            }
          } },
          el("label", { for: "claims", text: "Claims (JSON, with sub)" }), claims,
          el("label", { for: "token", text: "Token" }), token,
          el("fieldset", {}, el("legend", { text: "Explain one record (optional)" }), collection, id),
          el("button", { type: "submit", id: "check-user" }, "Check"));
          main.replaceChildren(el("h1", { text: "Users" }), form, results, el("h2", { text: "Rules in force" }));
          try {
            const rules = await api("/console/api/rules");
            main.append(rules.version
              ? [facts([["Version", number(rules.version)], ["Installed", time(rules.installedAt)]]), el("pre", { id: "rules-json", text: json(rules.rules) })]
              : el("p", { class: "quiet", text: "No rules installed: every collection is public to read, and only the owner writes." }));
          } catch (error) {
            main.append(failure(error));
          }
        };

        // Activity: the latest pushes, filtered by user, client, collection and outcome.
        pages.activity = async () => {
          const value = (name) => params.get(name) ?? "";
          const field = (name, label) => [el("label", { for: `activity-${name}`, text: label }), el("input", { id: `activity-${name}`, name, value: value(name), size: 14 })];
          const outcome = el("select", { id: "activity-outcome", name: "outcome" }, ["", "applied", "conflict", "denied", "invalid"].map((option) => el("option", { value: option, selected: option === value("outcome"), text: option || "any outcome" })));
          main.replaceChildren(el("h1", { text: "Activity" }), el("form", { method: "get", action: "/console/activity", class: "filters" },
            field("collection", "Collection"), field("user", "User"), field("client", "Client"), outcome, el("button", { type: "submit" }, "Filter")));
          const query = new URLSearchParams();
          for (const name of ["collection", "user", "client", "outcome", "before"]) if (value(name)) query.set(name, value(name));
          try {
            const data = await api(`/console/api/activity?${query}`);
            if (!value("before")) {
              main.append(el("h2", { text: "Refused by this server" }), data.refused.length === 0 ? el("p", { class: "quiet", text: "None kept." })
                : table(["Time", "Outcome", "Collection", "Record", "User", "Client", "Mutation", "Why"], data.refused.map((m) => el("tr", { "data-outcome": m.outcome },
                  el("td", { text: time(m.time) }), el("td", { text: m.outcome }), el("td", { text: m.collection }), el("td", {}, recordLink(m.collection, m.id)),
                  el("td", { text: m.user ?? "–" }), el("td", { text: m.client }), el("td", { text: `${m.mutation} (${m.operation})` }), el("td", { text: m.reason ?? "" }))), { id: "refused" }));
            }
            if (data.changes.length) {
              main.append(el("h2", { text: "Records changed last (every writer: the owner, apps, users)" }),
                table(["Position", "Time", "Collection", "Record", "State"], data.changes.map((c) => el("tr", { "data-position": c.position },
                  el("td", { text: number(c.position) }), el("td", { text: time(c.time) }), el("td", { text: c.collection }), el("td", {}, recordLink(c.collection, c.id)),
                  el("td", { text: c.hidden ? "hidden" : "visible" }))), { id: "changes" }));
            }
            main.append(el("h2", { text: "Pushes applied (every server on this database)" }), data.applied.length === 0 ? el("p", { class: "quiet", text: "None." })
              : table(["Position", "Time", "Collection", "Record", "User", "Client", "Mutation"], data.applied.map((m) => el("tr", { "data-position": m.position },
                el("td", { text: number(m.position) }), el("td", { text: time(m.time) }), el("td", { text: m.collection }), el("td", {}, recordLink(m.collection, m.id)),
                el("td", { class: "user", text: m.user ?? "(app key or owner)" }), el("td", { class: "client", text: m.client }), el("td", { text: `${m.mutation} (${m.operation})` }))), { id: "applied" }));
            if (data.next !== null) {
              query.set("before", data.next);
              main.append(el("p", {}, el("a", { id: "older", href: `/console/activity?${query}`, text: "Older" })));
            }
          } catch (error) {
            main.append(failure(error));
          }
        };

        // Actions: compact (previewed first), install rules (checked first).
        pages.actions = async () => {
          const olderThan = el("input", { id: "older-than", placeholder: "30d", size: 8 });
          const before = el("input", { id: "before-position", placeholder: "position", size: 10, inputmode: "numeric" });
          const dropBaked = el("input", { id: "drop-baked", type: "checkbox" });
          const report = el("div", { id: "compact-report" });
          const horizon = () => (before.value.trim() ? { before: Number(before.value.trim()) } : { olderThan: olderThan.value.trim() || "30d" });
          const describe = (data) => [
            el("p", { class: "report", text: `${data.dryRun ? "Would move" : "Moved"} the horizon from ${number(data.previousHorizon)} to ${number(data.horizon)}, ${data.dryRun ? "dropping" : "dropped"} ${number(data.droppedHidden)} hidden records, ${number(data.droppedVersions)} superseded versions and ${number(data.droppedBlobs)} blobs (${bytes(data.droppedBlobBytes)}).` }),
            data.keptFor.length ? el("p", { text: `Kept before ${number(data.asked)} for baked snapshots: ${data.keptFor.map((b) => `${b.collection} at ${b.etag}`).join(", ")}.` }) : "",
            data.expiredBakes.length ? el("p", { class: "error", text: `Expires baked snapshots: ${data.expiredBakes.map((b) => `${b.collection} at ${b.etag}`).join(", ")}.` }) : "",
            el("p", { text: `Baked tokens that stay valid: ${data.validBakes.length ? data.validBakes.map((b) => `${b.collection} at ${b.etag}`).join(", ") : "none recorded"}.` }),
          ];
          const preview = el("button", { type: "button", id: "compact-preview", onclick: async () => {
            report.replaceChildren(el("p", { class: "quiet", text: "Working out what it would drop…" }));
            try {
              const body = { ...horizon(), dropBaked: dropBaked.checked, dryRun: true };
              const data = await api("/console/api/compact", { method: "POST", body });
              report.replaceChildren(...describe(data), confirmed("Compact", `Compact to ${number(data.horizon)}? Tokens before it get 409 expired.`, async (holder) => {
                try {
                  // The horizon previewed, not an age worked out again now (more history may be old enough by then).
                  const done = await api("/console/api/compact", { method: "POST", body: { before: data.asked, dropBaked: body.dropBaked, dryRun: false } });
                  report.replaceChildren(el("h3", { text: "Compacted" }), ...describe(done));
                } catch (error) {
                  holder.replaceChildren(failure(error));
                }
              }, { id: "compact" }));
            } catch (error) {
              report.replaceChildren(failure(error));
            }
          } }, "Preview");
          const rules = el("textarea", { id: "rules-file", rows: 12, cols: 80, placeholder: '{"collections": {"notes": {"read": {"owner": {"eq": {"$claim": "sub"}}}}}}' });
          const rulesOutcome = el("div", { id: "rules-outcome" });
          const check = el("button", { type: "button", id: "rules-check", onclick: async () => {
            try {
              const checked = await api("/console/api/rules?check=true", { method: "POST", body: rules.value, json: false });
              const where = checked.enforcedHere
                ? "Every server on this database that verifies users follows them within a second."
                : "This server verifies no users (no --jwks or --jwt-secret): it keeps every collection public; servers on this database that verify users follow them within a second.";
              rulesOutcome.replaceChildren(el("p", { text: `Valid: ${checked.collections.length} collection(s), digest ${checked.digest}.` }), el("p", { id: "rules-where", text: where }), confirmed("Install", `Install these rules? ${where}`, async (holder) => {
                try {
                  const installed = await api("/console/api/rules", { method: "POST", body: rules.value, json: false });
                  rulesOutcome.replaceChildren(el("p", { id: "rules-installed", text: installed.installed ? `Installed as version ${installed.version}.` : `The database holds these rules already (version ${installed.version}).` }));
                } catch (error) {
                  holder.replaceChildren(failure(error));
                }
              }, { id: "rules-install" }));
            } catch (error) {
              const pointer = error.problem?.pointer;
              rulesOutcome.replaceChildren(el("p", { class: "error", role: "alert", id: "rules-error" }, error.message, pointer ? [" at ", el("code", { text: pointer })] : ""));
            }
          } }, "Check");
          main.replaceChildren(
            el("h1", { text: "Actions" }),
            el("section", {}, el("h2", { text: "Compact" }),
              el("p", { class: "quiet", text: "Drops hidden records and superseded versions before a horizon; apps with an older token reset to their bundled snapshot." }),
              el("div", { class: "fields" }, el("label", { for: "older-than", text: "Older than" }), olderThan, el("label", { for: "before-position", text: "or before position" }), before,
                el("label", {}, dropBaked, " past baked snapshots too")), preview, report),
            el("section", {}, el("h2", { text: "Install rules" }), rules, el("div", {}, check), rulesOutcome),
            el("section", {}, el("h2", { text: "Bake a snapshot" }), el("p", {}, "Open a collection from the ", el("a", { href: "/console/overview", text: "overview" }), " and download its snapshot there.")),
          );
        };

        const page = main?.dataset.page;
        if (page && pages[page]) pages[page]().catch((error) => main.replaceChildren(failure(error)));
        """##
}

// mcpkit inspector: the host side of MCP Apps (io.modelcontextprotocol/ui, SEP-1865).
//
// A tool whose _meta.ui.resourceUri names a ui:// view gets it rendered under its
// result, in an iframe with sandbox="allow-scripts" (never allow-same-origin) loaded
// from /apps/frame/<id>, which the Inspector serves with the view's own CSP (see
// _apps.py). The view talks JSON-RPC over postMessage; this file answers it:
//
// - only messages whose source is that iframe's window and whose origin is "null"
//   (the sandbox's opaque origin) are read; anything else is ignored;
// - a second load of the frame (the view navigated itself) closes the bridge;
// - tools/call is proxied to /api/apps/call only after the user clicks Allow in the
//   card (the server side checks the tool's visibility includes "app");
// - the access token stays in inspector.js: this file gets the api() function only,
//   and nothing sent to the frame carries it.
"use strict";

(() => {
  const PROTOCOL_VERSION = "2026-01-26";
  const MAX_PENDING_CONSENTS = 4;
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  let current = null; // the open bridge (one view at a time)

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "dataset") Object.assign(node.dataset, value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node[key] = value;
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function short(value, limit = 2000) {
    let text;
    try {
      text = typeof value === "string" ? value : JSON.stringify(value);
    } catch (e) {
      text = String(value);
    }
    return text.length > limit ? `${text.slice(0, limit)}…` : text;
  }

  /** The ui:// view a tool renders with (nested _meta.ui, or the deprecated flat key). */
  function viewOf(tool) {
    const meta = isObject(tool && tool._meta) ? tool._meta : {};
    const ui = isObject(meta.ui) ? meta.ui : {};
    const uri = typeof ui.resourceUri === "string" ? ui.resourceUri : meta["ui/resourceUri"];
    return typeof uri === "string" && uri.startsWith("ui://") ? uri : null;
  }

  function close() {
    if (!current) return;
    current.close();
    current = null;
  }

  /** Render the view of `tool` under its result in `container` (a no-op for a tool without one). */
  async function mount(container, ctx) {
    const uri = viewOf(ctx.tool);
    if (!uri) return null;
    close();
    const bridge = new Bridge(container, uri, ctx);
    current = bridge;
    await bridge.open();
    return bridge;
  }

  class Bridge {
    constructor(container, uri, ctx) {
      this.uri = uri;
      this.ctx = ctx;
      this.closed = false;
      this.initialized = false;
      this.loads = 0;
      this.pending = 0;
      this.frame = null;
      this.info = null;
      this.onMessage = (ev) => this.receive(ev);
      this.status = el("span", { className: "muted small", id: "app-status" }, "loading…");
      this.consents = el("div", { id: "app-consents" });
      this.log = el("ul", { className: "log-list app-log", id: "app-log" });
      this.box = el("div", { className: "app-frame-box", id: "app-frame-box" });
      this.card = el(
        "div",
        { className: "card app-card", id: "app-card", dataset: { state: "loading", uri } },
        el("div", { className: "result-head" }, el("span", { className: "label" }, "App "), el("code", null, uri), " ", this.status),
        this.consents,
        this.box,
        el("details", { className: "more" }, el("summary", null, "app messages"), this.log),
      );
      container.appendChild(this.card);
    }

    note(kind, text) {
      this.log.appendChild(el("li", { dataset: { kind } }, text));
    }

    setState(state, text) {
      this.card.dataset.state = state;
      this.status.textContent = text;
    }

    async open() {
      try {
        this.info = await this.ctx.api("apps/open", { uri: this.uri, tool: this.ctx.tool.name });
      } catch (e) {
        this.setState("error", `could not open the view: ${e.message}`);
        return;
      }
      if (this.closed) return;
      for (const warning of this.info.warnings || []) this.note("warning", warning);
      this.note("csp", `Content-Security-Policy: ${this.info.csp}`);
      const frame = document.createElement("iframe");
      frame.id = "app-frame";
      frame.title = `MCP App ${this.uri}`;
      // allow-scripts only: an opaque origin, no popups, no top navigation, no forms.
      frame.setAttribute("sandbox", "allow-scripts");
      if (this.info.allow) frame.setAttribute("allow", this.info.allow);
      frame.setAttribute("referrerpolicy", "no-referrer");
      frame.className = this.info.prefersBorder === false ? "app-frame borderless" : "app-frame";
      frame.addEventListener("load", () => {
        this.loads += 1;
        if (this.loads > 1) {
          // The view navigated itself elsewhere: whatever is there now is not the view.
          this.note("error", "the view navigated away; the bridge is closed");
          this.shutdown("navigated away");
        }
      });
      this.frame = frame;
      window.addEventListener("message", this.onMessage);
      frame.src = this.info.src;
      this.box.appendChild(frame);
    }

    shutdown(why) {
      this.closed = true;
      window.removeEventListener("message", this.onMessage);
      this.setState("closed", why);
    }

    close() {
      if (this.closed) return;
      this.shutdown("closed");
      if (this.info) this.ctx.api("apps/close", { frameId: this.info.frameId }).catch(() => {});
      if (this.frame) this.frame.remove();
    }

    post(message) {
      if (this.closed || !this.frame || !this.frame.contentWindow) return;
      // The frame's origin is opaque, so "*" is the only target origin that reaches it;
      // what is sent is what the view may see anyway (never the token).
      this.frame.contentWindow.postMessage({ jsonrpc: "2.0", ...message }, "*");
    }

    respond(id, result) {
      this.post({ id, result });
    }

    fail(id, code, message) {
      this.post({ id, error: { code, message } });
    }

    receive(ev) {
      if (this.closed || !this.frame || ev.source !== this.frame.contentWindow) return;
      if (ev.origin !== "null") return; // not the sandboxed view any more
      const msg = ev.data;
      if (!isObject(msg) || msg.jsonrpc !== "2.0") {
        this.note("ignored", `not JSON-RPC: ${short(msg, 200)}`);
        return;
      }
      const isRequest = typeof msg.method === "string" && (typeof msg.id === "number" || typeof msg.id === "string");
      if (isRequest) this.request(msg.id, msg.method, isObject(msg.params) ? msg.params : {});
      else if (typeof msg.method === "string") this.notification(msg.method, isObject(msg.params) ? msg.params : {});
      // Responses (to requests the Inspector never sends) are dropped.
    }

    request(id, method, params) {
      switch (method) {
        case "ui/initialize":
          this.respond(id, this.initializeResult(params));
          return;
        case "ping":
          this.respond(id, {});
          return;
        case "tools/call":
          this.askToCall(id, params);
          return;
        case "ui/message":
          this.note("message", `ui/message: ${short(params.content)}`);
          this.respond(id, {});
          return;
        case "ui/update-model-context":
          this.note("context", `model context: ${short(params)}`);
          this.respond(id, {});
          return;
        case "ui/request-display-mode":
          this.respond(id, { mode: "inline" });
          return;
        case "ui/open-link":
          this.note("note", `refused to open a link: ${short(params.url, 500)}`);
          this.fail(id, -32000, "the Inspector does not open links for apps");
          return;
        default:
          this.note("ignored", `unsupported request ${short(method, 100)}`);
          this.fail(id, -32601, `method not found: ${method}`);
      }
    }

    initializeResult(params) {
      const app = isObject(params.appInfo) ? params.appInfo : {};
      this.note("note", `ui/initialize from ${short(app.name, 100)} ${short(app.version, 50)}`);
      const declared = isObject(this.info.declared) ? this.info.declared : {};
      return {
        protocolVersion: PROTOCOL_VERSION,
        hostInfo: { name: "mcpkit-inspector", version: "1" },
        hostCapabilities: {
          serverTools: {},
          logging: {},
          sandbox: { csp: isObject(declared.csp) ? declared.csp : {}, permissions: isObject(declared.permissions) ? declared.permissions : {} },
        },
        hostContext: {
          toolInfo: { tool: this.ctx.tool },
          theme: window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light",
          displayMode: "inline",
          availableDisplayModes: ["inline"],
          containerDimensions: { maxHeight: 900 },
          platform: "web",
          locale: navigator.language,
          timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
        },
      };
    }

    notification(method, params) {
      switch (method) {
        case "ui/notifications/initialized":
          if (this.initialized) return;
          this.initialized = true;
          this.setState("ready", "ready");
          // SEP-1865: tool-input after initialize, then the result the view renders.
          this.post({ method: "ui/notifications/tool-input", params: { arguments: this.ctx.args || {} } });
          if (this.ctx.result !== undefined) this.post({ method: "ui/notifications/tool-result", params: this.ctx.result });
          return;
        case "ui/notifications/size-changed": {
          const height = Number(params.height);
          if (Number.isFinite(height) && this.frame) this.frame.style.height = `${Math.max(40, Math.min(2000, Math.ceil(height)))}px`;
          return;
        }
        case "notifications/message":
          this.note("log", short(params.data, 20000));
          return;
        default:
          this.note("ignored", `notification ${short(method, 100)}`);
      }
    }

    askToCall(id, params) {
      const name = typeof params.name === "string" ? params.name : "";
      const args = isObject(params.arguments) ? params.arguments : {};
      if (!name) {
        this.fail(id, -32602, "tools/call needs a tool name");
        return;
      }
      if (this.pending >= MAX_PENDING_CONSENTS) {
        this.fail(id, -32000, "too many tool calls are waiting for the user");
        return;
      }
      this.pending += 1;
      const decide = async (allowed) => {
        box.remove();
        this.pending -= 1;
        if (this.closed) return;
        if (!allowed) {
          this.note("consent", `denied: ${name}`);
          this.fail(id, -32000, "the user declined the tool call");
          return;
        }
        this.note("consent", `allowed: ${name}`);
        try {
          const res = await this.ctx.api("apps/call", { frameId: this.info.frameId, name, arguments: args });
          if (isObject(res.task)) this.fail(id, -32000, "the call became a task, which apps cannot follow here");
          else this.respond(id, res.result);
        } catch (e) {
          const code = e.info && typeof e.info.code === "number" ? e.info.code : -32000;
          this.note("error", `tools/call ${name}: ${e.message}`);
          this.fail(id, code, e.message);
        }
      };
      const box = el(
        "div",
        { className: "banner app-consent", dataset: { tool: name } },
        el("strong", null, "The app asks to call a tool: "),
        el("code", null, name),
        el("pre", null, short(args)),
        el("button", { type: "button", className: "primary", dataset: { consent: "allow" }, onclick: () => decide(true) }, "Allow"),
        " ",
        el("button", { type: "button", dataset: { consent: "deny" }, onclick: () => decide(false) }, "Deny"),
      );
      this.consents.appendChild(box);
    }
  }

  window.mcpkitApps = Object.freeze({ mount, close, viewOf });
})();

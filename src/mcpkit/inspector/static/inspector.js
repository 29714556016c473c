// mcpkit inspector: the page. Plain JavaScript, no build step.
//
// Safety rules for this file (the server we inspect is untrusted):
// - server data only ever reaches the page as text (textContent, input .value,
//   option .text) — never as HTML (no DOM API that parses markup);
// - the only URLs built from server data are data: URLs for <img> (image/*)
//   and <audio> (audio/*), after the MIME type and base64 are checked;
// - the access token comes from the URL fragment and lives in this closure only.
"use strict";

(() => {
  // ---------------------------------------------------------------- helpers

  const $ = (id) => document.getElementById(id);

  /** Build an element: el("div", {className: "x", onclick: f}, "text", child, ...). */
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) {
      for (const [key, value] of Object.entries(props)) {
        if (value === undefined || value === null) continue;
        if (key.startsWith("on") && typeof value === "function") {
          node.addEventListener(key.slice(2), value);
        } else if (key === "dataset") {
          for (const [k, v] of Object.entries(value)) node.dataset[k] = String(v);
        } else if (key === "attrs") {
          for (const [k, v] of Object.entries(value)) node.setAttribute(k, String(v));
        } else {
          node[key] = value;
        }
      }
    }
    append(node, children);
    return node;
  }

  // Bidi controls in server text are shown as escapes, not obeyed: an override can make
  // text read differently from what it is (CVE-2021-42574, "Trojan Source").
  const BIDI_CONTROLS = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  const shownBidi = (text) =>
    text.replace(BIDI_CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

  function append(node, children) {
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) append(node, child);
      else if (child instanceof Node) node.appendChild(child);
      else node.appendChild(document.createTextNode(shownBidi(String(child))));
    }
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  function pretty(value) {
    if (typeof value === "string") return value;
    try {
      return JSON.stringify(value, null, 2);
    } catch (e) {
      return String(value);
    }
  }

  function fmtTime(seconds) {
    const d = new Date(seconds * 1000);
    const pad = (n, w = 2) => String(n).padStart(w, "0");
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }

  function fmtSize(bytes) {
    if (typeof bytes !== "number") return "";
    if (bytes < 1024) return `${bytes} B`;
    if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
    return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  }

  function fmtMs(ms) {
    if (typeof ms !== "number") return "";
    return ms < 10 ? `${ms.toFixed(2)} ms` : ms < 1000 ? `${ms.toFixed(1)} ms` : `${(ms / 1000).toFixed(2)} s`;
  }

  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  const str = (v) => (typeof v === "string" ? v : "");

  // data: URLs only for checked media types and well-formed base64.
  const IMAGE_MIME = /^image\/[a-z0-9][a-z0-9.+-]{0,80}$/i;
  const AUDIO_MIME = /^audio\/[a-z0-9][a-z0-9.+-]{0,80}$/i;
  const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

  function dataUrl(mime, data, pattern) {
    if (typeof mime !== "string" || typeof data !== "string" || !pattern.test(mime)) return null;
    const compact = data.replace(/\s+/g, "");
    if (compact.length % 4 !== 0 || !BASE64.test(compact)) return null;
    return `data:${mime.toLowerCase()};base64,${compact}`;
  }

  // ---------------------------------------------------------------- token and API

  function readToken() {
    const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
    const fromQuery = new URLSearchParams(location.search).get("token");
    if (fromQuery && !fromHash) {
      // Keep the token out of the address the server sees on reload.
      history.replaceState(null, "", `${location.pathname}#token=${encodeURIComponent(fromQuery)}`);
    }
    return fromHash || fromQuery || "";
  }

  let token = readToken();

  class ApiError extends Error {
    constructor(message, status, info) {
      super(message);
      this.status = status;
      this.info = info || {};
    }
  }

  async function api(path, body) {
    const headers = { Authorization: `Bearer ${token}` };
    const init = { method: "GET", headers, cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      init.method = "POST";
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(`/api/${path}`, init);
    } catch (e) {
      throw new ApiError(`the inspector is not reachable (${e.message})`, 0);
    }
    let data = null;
    try {
      data = await res.json();
    } catch (e) {
      data = null;
    }
    if (!res.ok) {
      const info = data && data.error ? data.error : {};
      if (res.status === 401) showTokenBanner();
      throw new ApiError(info.message || `HTTP ${res.status}`, res.status, info);
    }
    return data;
  }

  function showTokenBanner() {
    $("token-banner").hidden = false;
  }

  function errorBox(err, title) {
    const info = err.info || {};
    const lines = [];
    if (info.code !== undefined) lines.push(`code ${info.code}`);
    if (err.status) lines.push(`HTTP ${err.status}`);
    return el(
      "div",
      { className: "error-box" },
      el("strong", null, title || "Error"),
      lines.length ? el("span", { className: "muted small" }, "  ", lines.join(" · ")) : null,
      el("pre", null, err.message),
      info.data !== undefined ? el("pre", { className: "muted" }, pretty(info.data)) : null,
    );
  }

  function showError(id, err) {
    const node = $(id);
    if (!err) {
      node.hidden = true;
      node.textContent = "";
      return;
    }
    node.hidden = false;
    node.textContent = shownBidi(err.message || String(err));
  }

  // ---------------------------------------------------------------- state

  const state = {
    status: "disconnected",
    server: null,
    tools: [],
    resources: [],
    templates: [],
    prompts: [],
    selectedTool: null,
    pendingCards: new Map(),
    lastStateSeq: 0,
    callProgress: new Map(),
    methodsById: new Map(),
    tasks: new Map(),
    toolTask: null,
  };

  // ---------------------------------------------------------------- connection form

  function setTransportFields() {
    const stdio = $("transport").value === "stdio";
    $("stdio-fields").hidden = !stdio;
    $("http-fields").hidden = stdio;
  }

  function linesToMap(text, sep, what) {
    const out = {};
    for (const raw of text.split("\n")) {
      const line = raw.trim();
      if (!line) continue;
      const at = line.indexOf(sep);
      if (at <= 0) throw new Error(`${what}: expected "name${sep}value", got ${JSON.stringify(line)}`);
      out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
    }
    return out;
  }

  function mapToLines(map, sep) {
    return Object.entries(map || {})
      .map(([k, v]) => `${k}${sep}${v}`)
      .join("\n");
  }

  function shellQuote(arg) {
    return /^[A-Za-z0-9_@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, "'\"'\"'")}'`;
  }

  function fillConnectForm(spec) {
    if (!spec) return;
    $("transport").value = spec.transport || "stdio";
    $("command").value = spec.command || "";
    $("args").value = (spec.args || []).map(shellQuote).join(" ");
    $("env").value = mapToLines(spec.env, "=");
    $("cwd").value = spec.cwd || "";
    $("url").value = spec.url || "";
    $("headers").value = mapToLines(spec.headers, ": ");
    $("protocol").value = spec.protocol || "auto";
    $("timeout").value = spec.timeout || 120;
    $("log-level").value = spec.logLevel || "";
    $("roots").value = (spec.roots || []).join("\n");
    setTransportFields();
  }

  function readConnectForm() {
    const transport = $("transport").value;
    const body = {
      transport,
      protocol: $("protocol").value,
      timeout: Number($("timeout").value) || 120,
      logLevel: $("log-level").value || null,
      roots: $("roots")
        .value.split("\n")
        .map((s) => s.trim())
        .filter(Boolean),
    };
    if (transport === "stdio") {
      body.command = $("command").value.trim();
      body.args = $("args").value; // split server-side with shlex.split, never run by a shell
      body.env = linesToMap($("env").value, "=", "environment");
      body.cwd = $("cwd").value.trim() || null;
      if (!body.command) throw new Error("a command is required");
    } else {
      body.url = $("url").value.trim();
      body.headers = linesToMap($("headers").value, ":", "headers");
      if (!body.url) throw new Error("a URL is required");
    }
    return body;
  }

  async function connect() {
    showError("connect-error", null);
    let body;
    try {
      body = readConnectForm();
    } catch (e) {
      showError("connect-error", e);
      return;
    }
    $("connect-btn").disabled = true;
    // The connection's status (and loading the lists) follows the live event
    // stream, the one ordered source of truth; this only reports failures.
    try {
      await api("connect", body);
      if (body.logLevel) $("set-log-level").value = body.logLevel;
    } catch (e) {
      let message = e.message;
      if (e.info && e.info.data && typeof e.info.data.stderr === "string") {
        message += `\n\nserver stderr:\n${e.info.data.stderr}`;
      }
      showError("connect-error", { message });
    } finally {
      $("connect-btn").disabled = false;
    }
  }

  async function disconnect() {
    try {
      await api("disconnect", {});
    } catch (e) {
      showError("connect-error", e);
    }
  }

  function setStatus(status, server, error) {
    const wasConnected = state.status === "connected";
    state.status = status;
    state.server = server;
    const pill = $("status");
    pill.dataset.status = status;
    pill.textContent = status;
    if (error && status !== "connected") pill.title = error;
    else pill.removeAttribute("title");
    const info = server && isObject(server.info) ? server.info : null;
    $("server-title").textContent = info ? shownBidi(`${str(info.title) || str(info.name)} ${str(info.version)}`) : "";
    const badge = $("protocol-badge");
    badge.hidden = !server;
    badge.textContent = server ? `${server.protocolVersion} · ${server.era}` : "";
    $("disconnect-btn").disabled = status === "disconnected";
    renderServerPanel(server);
    if (status === "connecting" || status === "connected") showError("connect-error", null);
    else if (error && $("connect-error").hidden) showError("connect-error", { message: error });
    if (wasConnected && status !== "connected") {
      for (const id of ["tools-count", "resources-count", "prompts-count", "skills-count"]) $(id).textContent = "";
    }
  }

  function renderServerPanel(server) {
    $("server-panel").hidden = !server;
    const dl = clear($("server-details"));
    if (!server) return;
    const info = isObject(server.info) ? server.info : {};
    const caps = isObject(server.capabilities) ? server.capabilities : {};
    const rows = [
      ["name", str(info.name)],
      ["title", str(info.title)],
      ["version", str(info.version)],
      ["protocol", str(server.protocolVersion)],
      ["era", str(server.era)],
      ["capabilities", Object.keys(caps).join(", ") || "(none)"],
    ];
    for (const [k, v] of rows) {
      if (!v) continue;
      dl.appendChild(el("dt", null, k));
      dl.appendChild(el("dd", null, v));
    }
    const instructions = str(server.instructions);
    $("instructions-box").hidden = !instructions;
    $("instructions").textContent = shownBidi(instructions);
    $("set-log-level").disabled = !("logging" in caps);
    $("server-note").textContent = "logging" in caps ? "" : "This server does not declare logging.";
  }

  // ---------------------------------------------------------------- lists

  function capability(name) {
    return state.server && isObject(state.server.capabilities) && name in state.server.capabilities;
  }

  async function loadEverything() {
    const jobs = [];
    if (capability("tools")) jobs.push(loadTools());
    if (capability("resources")) jobs.push(loadResources());
    if (capability("prompts")) jobs.push(loadPrompts());
    if (declaresSkills()) jobs.push(loadSkills());
    await Promise.allSettled(jobs);
  }

  function listItem(name, description, selected, onclick, dataName) {
    return el(
      "li",
      {
        className: selected ? "selected" : "",
        onclick,
        onkeydown: (ev) => {
          if (ev.key === "Enter" || ev.key === " ") {
            ev.preventDefault();
            onclick();
          }
        },
        dataset: { name: dataName },
        tabIndex: 0,
        attrs: { role: "button" },
      },
      el("div", { className: "name" }, name),
      description ? el("div", { className: "desc" }, description) : null,
    );
  }

  // One list from the server (tools, prompts): its items, or none with the error shown.
  async function fetchList(kind) {
    showError(`${kind}-error`, null);
    $(`${kind}-changed`).hidden = true;
    try {
      const res = await api(`${kind}/list`, {});
      return Array.isArray(res[kind]) ? res[kind] : [];
    } catch (e) {
      showError(`${kind}-error`, e);
      return [];
    }
  }

  async function loadTools() {
    state.tools = await fetchList("tools");
    renderTools();
  }

  function renderTools() {
    const ul = clear($("tools-list"));
    $("tools-count").textContent = state.tools.length ? String(state.tools.length) : "";
    for (const tool of state.tools) {
      const name = str(tool.name);
      ul.appendChild(
        listItem(name, str(tool.description), state.selectedTool === name, () => selectTool(name), name),
      );
    }
    if (state.selectedTool && !state.tools.some((t) => t.name === state.selectedTool)) {
      state.selectedTool = null;
      clear($("tool-detail")).appendChild(el("p", { className: "muted" }, "The selected tool is gone."));
    }
  }

  function selectTool(name) {
    state.selectedTool = name;
    renderTools();
    const tool = state.tools.find((t) => t.name === name);
    if (tool) renderToolDetail(tool);
  }

  // ---------------------------------------------------------------- forms from JSON Schema

  /** The schema to build a field from: unwrap nullable unions and type lists. */
  function effectiveSchema(prop) {
    if (!isObject(prop)) return {};
    let schema = prop;
    const union = Array.isArray(prop.anyOf) ? prop.anyOf : Array.isArray(prop.oneOf) ? prop.oneOf : null;
    if (union) {
      const consts = union.filter((s) => isObject(s) && "const" in s);
      if (consts.length && consts.length === union.length) {
        return { ...prop, enum: consts.map((s) => s.const), enumTitles: consts.map((s) => str(s.title)) };
      }
      const nonNull = union.filter((s) => isObject(s) && s.type !== "null");
      if (nonNull.length === 1) {
        schema = { ...nonNull[0], ...prop, anyOf: undefined, oneOf: undefined, type: nonNull[0].type };
      }
    }
    if (Array.isArray(schema.type)) {
      const types = schema.type.filter((t) => t !== "null");
      schema = { ...schema, type: types.length === 1 ? types[0] : undefined };
    }
    return schema;
  }

  function typeLabel(schema) {
    if (Array.isArray(schema.enum)) return "enum";
    if (schema.type === "array" && isObject(schema.items) && schema.items.type) return `${schema.items.type}[]`;
    return str(schema.type) || "json";
  }

  /**
   * One form field for a property. Returns {row, read}; read() gives
   * {present: bool, value} or throws an Error with a message for the user.
   */
  function schemaField(name, prop, required, prefix) {
    const schema = effectiveSchema(prop);
    const id = `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
    const label = el(
      "label",
      { className: "name", htmlFor: id },
      str(schema.title) || name,
      required ? el("span", { className: "req", title: "required" }, "*") : null,
      el("span", { className: "type" }, typeLabel(schema)),
    );
    const description = str(prop.description || schema.description);
    const hint = description ? el("small", { className: "hint" }, description) : null;
    const errorLine = el("div", { className: "field-error" });
    const hasDefault = isObject(prop) && "default" in prop;
    let input;
    let read;

    if (Array.isArray(schema.enum)) {
      input = el("select", { id, name });
      if (!required || !hasDefault) input.appendChild(el("option", { value: "" }, required ? "(choose)" : "(not set)"));
      schema.enum.forEach((value, i) => {
        const title = schema.enumTitles && schema.enumTitles[i] ? schema.enumTitles[i] : typeof value === "string" ? value : JSON.stringify(value);
        input.appendChild(el("option", { value: JSON.stringify(value) }, title));
      });
      if (hasDefault) input.value = JSON.stringify(prop.default);
      read = () => (input.value === "" ? { present: false } : { present: true, value: JSON.parse(input.value) });
    } else if (schema.type === "boolean") {
      if (required || hasDefault) {
        const box = el("input", { id, name, type: "checkbox", checked: hasDefault ? prop.default === true : false });
        read = () => ({ present: true, value: box.checked });
        input = el("span", { className: "checkbox-line" }, box, el("span", { className: "muted small" }, "true when checked"));
      } else {
        input = el("select", { id, name }, el("option", { value: "" }, "(not set)"), el("option", { value: "true" }, "true"), el("option", { value: "false" }, "false"));
        read = () => (input.value === "" ? { present: false } : { present: true, value: input.value === "true" });
      }
    } else if (schema.type === "integer" || schema.type === "number") {
      const integer = schema.type === "integer";
      input = el("input", { id, name, type: "number", step: integer ? "1" : "any" });
      if (typeof schema.minimum === "number") input.min = String(schema.minimum);
      if (typeof schema.maximum === "number") input.max = String(schema.maximum);
      if (hasDefault && typeof prop.default === "number") input.value = String(prop.default);
      read = () => {
        const text = input.value.trim();
        if (text === "") return { present: false };
        const value = Number(text);
        if (!Number.isFinite(value)) throw new Error("not a number");
        if (integer && !Number.isInteger(value)) throw new Error("must be an integer");
        return { present: true, value };
      };
    } else if (schema.type === "string") {
      const format = str(schema.format);
      const long = typeof schema.maxLength !== "number" || schema.maxLength > 200;
      if (format === "date" || format === "email" || format === "uri") {
        input = el("input", { id, name, type: format === "uri" ? "url" : format, spellcheck: false });
      } else if (long && /text|body|content|code|query|prompt|message/i.test(name)) {
        input = el("textarea", { id, name, rows: 3, spellcheck: false });
      } else {
        input = el("input", { id, name, type: "text", spellcheck: false });
      }
      if (hasDefault && typeof prop.default === "string") input.value = prop.default;
      read = () => (input.value === "" ? { present: false } : { present: true, value: input.value });
    } else if (schema.type === "array" && isObject(schema.items) && (Array.isArray(schema.items.enum) || Array.isArray(schema.items.anyOf))) {
      const itemSchema = effectiveSchema(schema.items);
      const options = Array.isArray(itemSchema.enum) ? itemSchema.enum : [];
      const defaults = hasDefault && Array.isArray(prop.default) ? prop.default : [];
      const boxes = options.map((value, i) => {
        const box = el("input", { type: "checkbox", checked: defaults.includes(value) });
        box.dataset.value = JSON.stringify(value);
        const title = itemSchema.enumTitles && itemSchema.enumTitles[i] ? itemSchema.enumTitles[i] : String(value);
        return el("label", { className: "checkbox-line" }, box, title);
      });
      input = el("div", { className: "checks", id }, boxes);
      read = () => {
        const values = boxes.map((l) => l.firstChild).filter((b) => b.checked).map((b) => JSON.parse(b.dataset.value));
        return values.length || required ? { present: true, value: values } : { present: false };
      };
    } else {
      // arrays, objects, unions, anything else: JSON text
      input = el("textarea", { id, name, rows: 3, spellcheck: false, placeholder: schema.type === "array" ? "[ … ] (JSON)" : schema.type === "object" ? "{ … } (JSON)" : "JSON value" });
      if (hasDefault) input.value = JSON.stringify(prop.default, null, 2);
      read = () => {
        const text = input.value.trim();
        if (text === "") return { present: false };
        try {
          return { present: true, value: JSON.parse(text) };
        } catch (e) {
          throw new Error(`not valid JSON: ${e.message}`);
        }
      };
    }
    const row = el("div", { className: "form-row field", dataset: { field: name } }, label, input, hint, errorLine);
    return {
      name,
      row,
      read: () => {
        row.classList.remove("invalid");
        errorLine.textContent = "";
        try {
          const out = read();
          if (!out.present && required) throw new Error("required");
          return out;
        } catch (e) {
          row.classList.add("invalid");
          errorLine.textContent = e.message;
          throw e;
        }
      },
    };
  }

  /** A form for an object schema: {element, collect()} — collect() returns the value or null (errors shown). */
  function schemaForm(schema, prefix) {
    const root = isObject(schema) ? schema : {};
    const props = isObject(root.properties) ? root.properties : {};
    const required = new Set(Array.isArray(root.required) ? root.required : []);
    const fields = Object.entries(props).map(([name, prop]) => schemaField(name, prop, required.has(name), prefix));
    const element = el("div", { className: "form-grid" }, fields.map((f) => f.row));
    if (!fields.length) element.appendChild(el("p", { className: "muted small" }, "No arguments."));
    return {
      element,
      collect() {
        const value = {};
        let ok = true;
        for (const field of fields) {
          try {
            const out = field.read();
            if (out.present) value[field.name] = out.value;
          } catch (e) {
            ok = false;
          }
        }
        return ok ? value : null;
      },
    };
  }

  // ---------------------------------------------------------------- rendering results

  function mediaBlock(kind, mime, data) {
    if (kind === "image") {
      const url = dataUrl(mime, data, IMAGE_MIME);
      if (url) return el("img", { src: url, alt: `image (${mime})` });
      return el("p", { className: "muted" }, `[image not shown: MIME type ${JSON.stringify(str(mime))} is not image/* or the data is not base64]`);
    }
    const url = dataUrl(mime, data, AUDIO_MIME);
    if (url) return el("audio", { src: url, controls: true });
    return el("p", { className: "muted" }, `[audio not shown: MIME type ${JSON.stringify(str(mime))} is not audio/* or the data is not base64]`);
  }

  function textBody(text, mime) {
    if (typeof mime === "string" && /json/i.test(mime)) {
      try {
        return el("pre", null, JSON.stringify(JSON.parse(text), null, 2));
      } catch (e) {
        /* not JSON after all: show as is */
      }
    }
    return el("pre", null, text);
  }

  function resourceContents(contents) {
    const uri = str(contents.uri);
    const mime = str(contents.mimeType);
    let body;
    if (typeof contents.text === "string") {
      body = textBody(contents.text, mime);
    } else if (typeof contents.blob === "string") {
      if (IMAGE_MIME.test(mime)) body = mediaBlock("image", mime, contents.blob);
      else if (AUDIO_MIME.test(mime)) body = mediaBlock("audio", mime, contents.blob);
      else {
        const bytes = Math.floor((contents.blob.replace(/\s+/g, "").length * 3) / 4);
        body = el("div", null, el("p", { className: "muted small" }, `binary, about ${fmtSize(bytes)} (base64 below)`), el("pre", null, contents.blob.slice(0, 2000) + (contents.blob.length > 2000 ? " …" : "")));
      }
    } else {
      body = el("pre", null, pretty(contents));
    }
    return el("div", { className: "block" }, el("div", { className: "block-head" }, `resource ${uri}${mime ? ` · ${mime}` : ""}`), el("div", { className: "block-body" }, body));
  }

  function contentBlock(block) {
    if (!isObject(block)) return el("div", { className: "block" }, el("div", { className: "block-body" }, el("pre", null, pretty(block))));
    const type = str(block.type);
    const head = (text) => el("div", { className: "block-head" }, text);
    const body = (...children) => el("div", { className: "block-body" }, ...children);
    switch (type) {
      case "text":
        return el("div", { className: "block", dataset: { type } }, head("text"), body(el("pre", { className: "text-content" }, str(block.text))));
      case "image":
        return el("div", { className: "block", dataset: { type } }, head(`image · ${str(block.mimeType)}`), body(mediaBlock("image", block.mimeType, block.data)));
      case "audio":
        return el("div", { className: "block", dataset: { type } }, head(`audio · ${str(block.mimeType)}`), body(mediaBlock("audio", block.mimeType, block.data)));
      case "resource":
        return isObject(block.resource) ? resourceContents(block.resource) : el("pre", null, pretty(block));
      case "resource_link":
        return el(
          "div",
          { className: "block", dataset: { type } },
          head(`resource link${block.mimeType ? ` · ${str(block.mimeType)}` : ""}`),
          body(el("div", { className: "mono" }, str(block.uri)), block.name ? el("div", null, str(block.title) || str(block.name)) : null, block.description ? el("div", { className: "muted" }, str(block.description)) : null),
        );
      default:
        return el("div", { className: "block", dataset: { type } }, head(type || "content"), body(el("pre", null, pretty(block))));
    }
  }

  function renderToolResult(container, res) {
    clear(container).appendChild(toolResultNode(res.result, fmtMs(res.durationMs), "tool-result"));
  }

  /** A CallToolResult as blocks: content, structured content, the raw result. */
  function toolResultNode(value, aside, id) {
    const result = isObject(value) ? value : {};
    const isError = result.isError === true;
    const content = Array.isArray(result.content) ? result.content : [];
    return el(
      "div",
      { className: `result${isError ? " is-error" : ""}`, id },
      el("div", { className: "result-head" }, el("span", { className: "label" }, isError ? "Tool error (isError)" : "Result"), el("span", { className: "muted" }, aside)),
      content.map(contentBlock),
      "structuredContent" in result
        ? el("div", { className: "block", dataset: { type: "structured" } }, el("div", { className: "block-head" }, "structured content"), el("div", { className: "block-body" }, el("pre", null, pretty(result.structuredContent))))
        : null,
      el("details", { className: "more" }, el("summary", null, "raw result"), el("pre", null, pretty(result))),
    );
  }

  // ---------------------------------------------------------------- tools

  let callCounter = 0;

  function renderToolDetail(tool) {
    const pane = clear($("tool-detail"));
    const annotations = isObject(tool.annotations) ? tool.annotations : {};
    const hints = [];
    for (const [key, label] of [["readOnlyHint", "read-only"], ["destructiveHint", "destructive"], ["idempotentHint", "idempotent"], ["openWorldHint", "open world"]]) {
      if (annotations[key] === true) hints.push(el("span", { className: "tag" }, label));
    }
    // MCP Apps: the tool's view (rendered under its result) and who may call it.
    const view = window.mcpkitApps ? window.mcpkitApps.viewOf(tool) : null;
    if (view) hints.push(el("span", { className: "tag", dataset: { app: view } }, `app view ${view}`));
    const ui = isObject(tool._meta) && isObject(tool._meta.ui) ? tool._meta.ui : {};
    if (Array.isArray(ui.visibility) && !ui.visibility.includes("model")) hints.push(el("span", { className: "tag" }, "app only"));
    const form = schemaForm(tool.inputSchema, "tool");
    const jsonToggle = el("input", { type: "checkbox" });
    const jsonArea = el("textarea", { rows: 6, spellcheck: false, hidden: true, attrs: { "aria-label": "arguments as JSON" } });
    jsonToggle.addEventListener("change", () => {
      if (jsonToggle.checked) {
        jsonArea.value = JSON.stringify(form.collect() || {}, null, 2);
      }
      jsonArea.hidden = !jsonToggle.checked;
      form.element.hidden = jsonToggle.checked;
    });
    const resultArea = el("div", { id: "tool-result-area" });
    const progress = el("div", { className: "progress", hidden: true }, el("div"));
    const progressText = el("div", { className: "progress-text" });
    const callBtn = el("button", { type: "submit", className: "primary", id: "call-btn" }, "Call tool");
    const cancelBtn = el("button", { type: "button", hidden: true }, "Cancel");
    let callId = null;
    cancelBtn.addEventListener("click", () => {
      if (callId) api("cancel", { callId }).catch(() => {});
    });
    const formNode = el(
      "form",
      {
        id: "tool-form",
        autocomplete: "off",
        onsubmit: async (ev) => {
          ev.preventDefault();
          let args;
          if (jsonToggle.checked) {
            try {
              args = JSON.parse(jsonArea.value || "{}");
            } catch (e) {
              clear(resultArea).appendChild(errorBox(new ApiError(`arguments: not valid JSON: ${e.message}`, 0), "Invalid arguments"));
              return;
            }
          } else {
            args = form.collect();
            if (args === null) return;
          }
          callId = `call-${++callCounter}`;
          state.callProgress.set(callId, { bar: progress, text: progressText });
          callBtn.disabled = true;
          cancelBtn.hidden = false;
          progress.hidden = true;
          progressText.textContent = "calling…";
          try {
            const res = await api("tools/call", { name: tool.name, arguments: args, callId });
            if (isObject(res.task)) showToolTask(resultArea, res.task, res.durationMs);
            else renderToolResult(resultArea, res);
            // MCP Apps: a tool with a ui:// view renders it, sandboxed, under its result (apps.js).
            if (!isObject(res.task) && window.mcpkitApps) window.mcpkitApps.mount(resultArea, { api, tool, args, result: res.result });
          } catch (e) {
            clear(resultArea).appendChild(errorBox(e, "Call failed"));
          } finally {
            state.callProgress.delete(callId);
            callId = null;
            callBtn.disabled = false;
            cancelBtn.hidden = true;
            progressText.textContent = "";
            progress.hidden = true;
          }
        },
      },
      form.element,
      el("label", { className: "checkbox-line small" }, jsonToggle, "edit arguments as JSON"),
      jsonArea,
      el("div", { className: "buttons" }, callBtn, cancelBtn),
      progress,
      progressText,
    );
    pane.appendChild(
      el(
        "div",
        { className: "card" },
        el("h3", null, str(tool.name)),
        tool.title || annotations.title ? el("div", null, str(tool.title) || str(annotations.title)) : null,
        tool.description ? el("div", { className: "description" }, str(tool.description)) : null,
        hints.length ? el("div", { className: "hints" }, hints) : null,
        formNode,
        el("details", { className: "more" }, el("summary", null, "input schema"), el("pre", null, pretty(tool.inputSchema))),
        tool.outputSchema ? el("details", { className: "more" }, el("summary", null, "output schema"), el("pre", null, pretty(tool.outputSchema))) : null,
      ),
    );
    pane.appendChild(resultArea);
  }

  function onProgress(data) {
    const entry = state.callProgress.get(data.callId);
    if (!entry) return;
    const total = typeof data.total === "number" && data.total > 0 ? data.total : null;
    entry.bar.hidden = total === null;
    if (total !== null) entry.bar.firstChild.style.width = `${Math.min(100, (100 * data.progress) / total)}%`;
    entry.text.textContent = `progress ${data.progress}${total !== null ? ` / ${total}` : ""}${data.message ? ` — ${data.message}` : ""}`;
  }

  // ---------------------------------------------------------------- tasks
  //
  // A tool call the server answers with a task (2026-07-28, tasks extension), or a
  // task opened by id, is followed by the inspector: it polls tasks/get at the
  // server's pollIntervalMs and sends each poll as a "task" event. The task's input
  // requests come as pending requests tagged with the task (answered with the same
  // forms; the inspector sends the answers with tasks/update).

  const TERMINAL = new Set(["completed", "failed", "cancelled"]);

  function fmtIso(iso) {
    if (typeof iso !== "string" || !iso) return "";
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return iso;
    const pad = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${fmtTime(d.getTime() / 1000)}`;
  }

  function fmtDuration(ms) {
    if (ms === null || ms === undefined) return "unlimited";
    if (typeof ms !== "number") return "";
    if (ms < 1000) return `${ms} ms`;
    const s = ms / 1000;
    if (s < 120) return `${+s.toFixed(1)} s`;
    if (s < 7200) return `${+(s / 60).toFixed(1)} min`;
    return `${+(s / 3600).toFixed(1)} h`;
  }

  function taskErrorBox(task) {
    const error = isObject(task.error) ? task.error : {};
    const info = { code: typeof error.code === "number" ? error.code : undefined, data: error.data };
    return errorBox(new ApiError(str(error.message) || str(task.statusMessage) || "the task failed", 0, info), "Task failed");
  }

  function inputRequestLine(key, request) {
    const req = isObject(request) ? request : {};
    const params = isObject(req.params) ? req.params : {};
    const method = str(req.method);
    let what = method;
    if (method === "elicitation/create") what = str(params.message) || "(elicitation)";
    else if (method === "sampling/createMessage") what = "a model completion (sampling)";
    else if (method === "roots/list") what = "the roots (answered with the connection's roots)";
    return el("li", { dataset: { key } }, el("span", { className: "mono muted" }, `${key} · ${method}`), " ", el("span", null, what));
  }

  function taskCard(taskId) {
    const view = {
      name: el("span", { className: "name" }),
      status: el("span", { className: "pill task-status" }),
      id: el("code", { className: "task-id" }, taskId),
      args: el("div", { className: "mono muted small task-args" }),
      message: el("div", { className: "task-message" }),
      times: el("dl", { className: "details task-times" }),
      note: el("p", { className: "muted small task-note" }),
      inputs: el("div", { className: "task-inputs" }),
      outcome: el("div", { className: "task-outcome" }),
      raw: el("pre"),
      error: el("p", { className: "error-text", hidden: true }),
      cancel: el("button", { type: "button", className: "danger task-cancel" }, "Cancel task"),
      follow: el("button", { type: "button", className: "task-follow" }, "Follow"),
      forget: el("button", { type: "button", className: "task-forget" }, "Forget"),
      shown: null,
    };
    const act = (path, body) => async () => {
      view.error.hidden = true;
      try {
        const res = await api(path, body);
        if (isObject(res.task)) onTask(res.task);
      } catch (e) {
        view.error.hidden = false;
        view.error.textContent = e.message;
      }
    };
    view.cancel.addEventListener("click", act("tasks/cancel", { taskId }));
    view.follow.addEventListener("click", act("tasks/open", { taskId }));
    view.forget.addEventListener("click", act("tasks/forget", { taskId }));
    view.card = el(
      "div",
      { className: "card task-card", dataset: { taskId } },
      el("div", { className: "task-head" }, view.name, view.status, el("span", { className: "spacer" }), view.cancel, view.follow, view.forget),
      el("div", { className: "small" }, el("span", { className: "muted" }, "task "), view.id),
      view.args,
      view.message,
      view.times,
      view.note,
      view.inputs,
      view.outcome,
      view.error,
      el("details", { className: "more" }, el("summary", null, "task as last seen"), view.raw),
    );
    return view;
  }

  function updateTaskCard(view, task) {
    const ended = TERMINAL.has(task.status);
    view.card.dataset.status = task.status;
    view.card.dataset.followed = String(task.followed === true);
    view.name.textContent = str(task.tool) || "(opened by id)";
    view.status.textContent = task.status;
    view.status.dataset.status = task.status;
    view.args.textContent = task.arguments ? `arguments ${task.arguments}` : "";
    view.message.textContent = str(task.statusMessage);
    view.message.hidden = !task.statusMessage;
    const dl = clear(view.times);
    const rows = [
      ["created", fmtIso(task.createdAt)],
      ["updated", fmtIso(task.lastUpdatedAt)],
      ["kept for", fmtDuration(task.ttlMs)],
      ["poll every", typeof task.pollIntervalMs === "number" ? fmtMs(task.pollIntervalMs) : "(not said: 1 s)"],
      ["last seen", typeof task.seenAt === "number" ? `${fmtTime(task.seenAt)}${task.polls ? ` (${task.polls} polls)` : ""}` : ""],
      ["followed", task.followed ? "yes" : ended ? "no (ended)" : "no"],
    ];
    for (const [k, v] of rows) {
      if (!v) continue;
      dl.appendChild(el("dt", null, k));
      dl.appendChild(el("dd", { dataset: { field: k } }, v));
    }
    view.note.textContent = str(task.note);
    view.note.hidden = !task.note;
    const requests = task.status === "input_required" && isObject(task.inputRequests) ? task.inputRequests : null;
    clear(view.inputs);
    if (requests) {
      view.inputs.appendChild(el("div", { className: "kind" }, "Waiting for input (the request is shown at the top of the page):"));
      view.inputs.appendChild(el("ul", { className: "plain" }, Object.entries(requests).map(([k, r]) => inputRequestLine(k, r))));
    }
    view.cancel.hidden = ended;
    view.follow.hidden = ended || task.followed === true;
    view.forget.hidden = !ended && task.followed === true;
    view.raw.textContent = pretty(task);
    // The outcome is drawn once (a result can be big, and the user may be reading it).
    if (ended && view.shown !== task.status) {
      view.shown = task.status;
      clear(view.outcome).appendChild(taskOutcome(task));
    } else if (!ended && view.shown !== null) {
      view.shown = null;
      clear(view.outcome);
    }
  }

  function taskOutcome(task) {
    if (task.status === "completed") {
      if (typeof task.resultOmitted === "number") {
        const holder = el("div", { className: "muted" }, `loading the result (${fmtSize(task.resultOmitted)})…`);
        api("tasks/get", { taskId: task.taskId }).then(
          (res) => holder.replaceWith(toolResultNode(res.task.result, "", null)),
          (e) => holder.replaceWith(errorBox(e, "Could not load the result")),
        );
        return holder;
      }
      return toolResultNode(task.result, "", null);
    }
    if (task.status === "failed") return taskErrorBox(task);
    return el("p", { className: "muted task-cancelled" }, "Cancelled.");
  }

  function onTask(task) {
    if (!isObject(task) || typeof task.taskId !== "string") return;
    let entry = state.tasks.get(task.taskId);
    if (!entry) {
      entry = { task, view: taskCard(task.taskId) };
      state.tasks.set(task.taskId, entry);
      $("tasks-list").prepend(entry.view.card);
    }
    entry.task = task;
    updateTaskCard(entry.view, task);
    renderTaskCounts();
    const watch = state.toolTask;
    if (watch && watch.taskId === task.taskId) updateToolTask(watch, task);
  }

  function onTaskForgotten(taskId) {
    const entry = state.tasks.get(taskId);
    if (entry) entry.view.card.remove();
    state.tasks.delete(taskId);
    renderTaskCounts();
  }

  function renderTaskCounts() {
    const all = [...state.tasks.values()];
    $("tasks-count").textContent = all.length ? String(all.length) : "";
    $("tasks-empty").hidden = all.length > 0;
    const waiting = all.filter((e) => e.task.status === "input_required").length;
    const badge = $("tasks-attention");
    badge.hidden = waiting === 0;
    badge.textContent = waiting ? `${waiting} waiting for input` : "";
  }

  function showTaskInPanel(taskId) {
    document.querySelector(".main .tabs button[data-tab='tasks']").click();
    const entry = state.tasks.get(taskId);
    if (entry) entry.view.card.scrollIntoView({ block: "nearest" });
  }

  /** The tool pane when a call became a task: its id and status, then its outcome. */
  function showToolTask(container, task, durationMs) {
    const status = el("span", { className: "pill task-status" });
    const line = el(
      "div",
      { className: "card task-stub", id: "tool-task", dataset: { taskId: task.taskId } },
      el("div", null, "The server runs this call as a task ", el("code", null, task.taskId), " ", status),
      el("div", { className: "muted small" }, `answered in ${fmtMs(durationMs)}; followed in the Tasks tab until it ends`),
      el("div", { className: "buttons" }, el("button", { type: "button", onclick: () => showTaskInPanel(task.taskId) }, "Show in Tasks")),
    );
    const outcome = el("div");
    clear(container).append(line, outcome);
    state.toolTask = { taskId: task.taskId, container, status, outcome, shown: false };
    onTask(task);
  }

  function updateToolTask(watch, task) {
    if (!watch.container.isConnected) {
      state.toolTask = null;
      return;
    }
    watch.status.textContent = task.status;
    watch.status.dataset.status = task.status;
    if (!TERMINAL.has(task.status) || watch.shown) return;
    watch.shown = true;
    if (task.status === "completed" && typeof task.resultOmitted !== "number") {
      watch.outcome.appendChild(toolResultNode(task.result, "", "tool-result"));
    } else {
      watch.outcome.appendChild(taskOutcome(task));
    }
  }

  async function openTask(ev) {
    ev.preventDefault();
    showError("task-open-error", null);
    const taskId = $("task-open-id").value.trim();
    if (!taskId) {
      showError("task-open-error", { message: "a task id is required" });
      return;
    }
    $("task-open-btn").disabled = true;
    try {
      const res = await api("tasks/open", { taskId });
      onTask(res.task);
      $("task-open-id").value = "";
      showTaskInPanel(taskId);
    } catch (e) {
      const code = e.info && e.info.code !== undefined ? ` (code ${e.info.code})` : "";
      showError("task-open-error", { message: `${e.message}${code}` });
    } finally {
      $("task-open-btn").disabled = false;
    }
  }

  // ---------------------------------------------------------------- resources

  async function loadResources() {
    showError("resources-error", null);
    $("resources-changed").hidden = true;
    const [resources, templates] = await Promise.allSettled([api("resources/list", {}), api("resources/templates", {})]);
    state.resources = resources.status === "fulfilled" && Array.isArray(resources.value.resources) ? resources.value.resources : [];
    state.templates = templates.status === "fulfilled" && Array.isArray(templates.value.templates) ? templates.value.templates : [];
    if (resources.status === "rejected") showError("resources-error", resources.reason);
    else if (templates.status === "rejected") showError("resources-error", templates.reason);
    renderResources();
  }

  function renderResources() {
    const ul = clear($("resources-list"));
    $("resources-count").textContent = state.resources.length + state.templates.length ? String(state.resources.length + state.templates.length) : "";
    for (const r of state.resources) {
      ul.appendChild(listItem(str(r.uri), str(r.title) || str(r.name), false, () => showResource(r), str(r.uri)));
    }
    if (!state.resources.length) ul.appendChild(el("li", { className: "muted" }, "(none)"));
    const tl = clear($("templates-list"));
    for (const tpl of state.templates) {
      tl.appendChild(listItem(str(tpl.uriTemplate), str(tpl.title) || str(tpl.name), false, () => showTemplate(tpl), str(tpl.uriTemplate)));
    }
    if (!state.templates.length) tl.appendChild(el("li", { className: "muted" }, "(none)"));
  }

  function resourceCard(title, description, extra) {
    return el("div", { className: "card" }, el("h3", null, title), description ? el("div", { className: "description" }, description) : null, extra);
  }

  async function readInto(container, body) {
    clear(container).appendChild(el("p", { className: "muted" }, "reading…"));
    try {
      const res = await api("resources/read", body);
      const contents = Array.isArray(res.result.contents) ? res.result.contents : [];
      clear(container).appendChild(
        el(
          "div",
          { className: "result", id: "resource-result" },
          el("div", { className: "result-head" }, el("span", { className: "label" }, "Contents"), el("span", { className: "mono muted" }, str(res.uri))),
          contents.map(resourceContents),
          el("details", { className: "more" }, el("summary", null, "raw result"), el("pre", null, pretty(res.result))),
        ),
      );
    } catch (e) {
      clear(container).appendChild(errorBox(e, "Read failed"));
    }
  }

  function showResource(resource) {
    const pane = clear($("resource-detail"));
    const out = el("div");
    const buttons = el("div", { className: "buttons" }, el("button", { type: "button", className: "primary", onclick: () => readInto(out, { uri: resource.uri }) }, "Read"));
    const caps = state.server && isObject(state.server.capabilities) ? state.server.capabilities : {};
    if (isObject(caps.resources) && caps.resources.subscribe === true) {
      buttons.appendChild(el("button", { type: "button", onclick: () => api("resources/subscribe", { uri: resource.uri }).then(() => note(`subscribed to ${resource.uri}`), (e) => note(e.message)) }, "Subscribe"));
      buttons.appendChild(el("button", { type: "button", onclick: () => api("resources/unsubscribe", { uri: resource.uri }).then(() => note(`unsubscribed from ${resource.uri}`), (e) => note(e.message)) }, "Unsubscribe"));
    }
    const meta = el("div", { className: "muted small" }, [str(resource.name), str(resource.mimeType), typeof resource.size === "number" ? fmtSize(resource.size) : ""].filter(Boolean).join(" · "));
    pane.appendChild(resourceCard(str(resource.uri), str(resource.description), [meta, buttons]));
    pane.appendChild(out);
    readInto(out, { uri: resource.uri });
  }

  function showTemplate(tpl) {
    const pane = clear($("resource-detail"));
    const out = el("div");
    const names = Array.isArray(tpl.variables) ? tpl.variables : [];
    const inputs = names.map((name) => el("input", { name, type: "text", spellcheck: false }));
    const form = el(
      "form",
      {
        id: "template-form",
        autocomplete: "off",
        onsubmit: (ev) => {
          ev.preventDefault();
          const variables = {};
          inputs.forEach((input) => {
            variables[input.name] = input.value;
          });
          readInto(out, { template: tpl.uriTemplate, variables });
        },
      },
      names.map((name, i) => el("label", { className: "field form-row" }, el("span", { className: "name" }, name), inputs[i])),
      el("div", { className: "buttons" }, el("button", { type: "submit", className: "primary" }, "Read")),
    );
    pane.appendChild(resourceCard(str(tpl.uriTemplate), str(tpl.description), [el("div", { className: "muted small" }, [str(tpl.name), str(tpl.mimeType)].filter(Boolean).join(" · ")), form]));
    pane.appendChild(out);
  }

  // ---------------------------------------------------------------- prompts

  async function loadPrompts() {
    state.prompts = await fetchList("prompts");
    const ul = clear($("prompts-list"));
    $("prompts-count").textContent = state.prompts.length ? String(state.prompts.length) : "";
    for (const p of state.prompts) ul.appendChild(listItem(str(p.name), str(p.description), false, () => showPrompt(p), str(p.name)));
  }

  function showPrompt(prompt) {
    const pane = clear($("prompt-detail"));
    const out = el("div");
    const args = Array.isArray(prompt.arguments) ? prompt.arguments.filter(isObject) : [];
    const schema = { type: "object", properties: {}, required: [] };
    for (const a of args) {
      schema.properties[str(a.name)] = { type: "string", description: str(a.description), title: str(a.title) || undefined };
      if (a.required === true) schema.required.push(str(a.name));
    }
    const form = schemaForm(schema, "prompt");
    const node = el(
      "form",
      {
        id: "prompt-form",
        autocomplete: "off",
        onsubmit: async (ev) => {
          ev.preventDefault();
          const values = form.collect();
          if (values === null) return;
          clear(out).appendChild(el("p", { className: "muted" }, "getting…"));
          try {
            const res = await api("prompts/get", { name: prompt.name, arguments: values });
            const result = isObject(res.result) ? res.result : {};
            const messages = Array.isArray(result.messages) ? result.messages : [];
            clear(out).appendChild(
              el(
                "div",
                { className: "result", id: "prompt-result" },
                result.description ? el("div", { className: "description" }, str(result.description)) : null,
                messages.map((m) => el("div", { className: "message" }, el("div", { className: "role" }, str(m.role)), contentBlock(m.content))),
                el("details", { className: "more" }, el("summary", null, "raw result"), el("pre", null, pretty(result))),
              ),
            );
          } catch (e) {
            clear(out).appendChild(errorBox(e, "Get prompt failed"));
          }
        },
      },
      form.element,
      el("div", { className: "buttons" }, el("button", { type: "submit", className: "primary" }, "Get prompt")),
    );
    pane.appendChild(el("div", { className: "card" }, el("h3", null, str(prompt.name)), prompt.description ? el("div", { className: "description" }, str(prompt.description)) : null, node));
    pane.appendChild(out);
  }

  // ---------------------------------------------------------------- skills (io.modelcontextprotocol/skills)
  // Entries only: listing fetches no file. A file's content comes from /api/skills/read, which
  // returns it only once verified against the server's entry. Everything the server sent is
  // shown as text (textContent via el()), never as HTML.

  const SKILLS_EXTENSION = "io.modelcontextprotocol/skills";

  function declaresSkills() {
    const caps = state.server && isObject(state.server.capabilities) ? state.server.capabilities : {};
    return isObject(caps.extensions) && SKILLS_EXTENSION in caps.extensions;
  }

  async function loadSkills() {
    showError("skills-error", null);
    const ul = clear($("skills-list"));
    let skills = [];
    try {
      const res = await api("skills/list", {});
      skills = Array.isArray(res.skills) ? res.skills.filter(isObject) : [];
    } catch (e) {
      showError("skills-error", e);
    }
    $("skills-count").textContent = skills.length ? String(skills.length) : "";
    for (const s of skills) {
      const note = s.problem ? `invalid entry: ${str(s.problem)}` : str(s.description);
      ul.appendChild(listItem(str(s.name) || str(s.uri), note, false, () => showSkill(s), str(s.uri)));
    }
  }

  function showSkill(skill) {
    const pane = clear($("skill-detail"));
    const out = el("div", { id: "skill-file" });
    const view = async (file) => {
      clear(out).appendChild(el("p", { className: "muted" }, `reading ${str(file.path)}…`));
      try {
        const res = await api("skills/read", { uri: skill.uri, path: file.path });
        const body = typeof res.text === "string" ? res.text : `(binary, ${fmtSize(res.size)}: not shown)`;
        clear(out).appendChild(
          el(
            "div",
            { className: "result", id: "skill-file-content" },
            el("div", { className: "muted small" }, `${str(res.path)} · ${fmtSize(res.size)} · verified ${str(res.digest)}`),
            el("pre", null, body),
          ),
        );
      } catch (e) {
        clear(out).appendChild(errorBox(e, "File refused"));
      }
    };
    const files = Array.isArray(skill.files) ? skill.files.filter(isObject) : [];
    const rows = files.map((f) =>
      el(
        "tr",
        { dataset: { path: str(f.path) } },
        el("td", null, el("code", null, str(f.path))),
        el("td", { className: "muted small" }, fmtSize(f.size)),
        el("td", { className: "muted small" }, el("code", null, str(f.digest))),
        el("td", null, el("button", { type: "button", onclick: () => view(f) }, "View")),
      ),
    );
    pane.appendChild(
      el(
        "div",
        { className: "card", id: "skill-card" },
        el("h3", null, str(skill.name) || str(skill.uri)),
        el("div", { className: "muted small" }, el("code", null, str(skill.uri))),
        skill.description ? el("div", { className: "description" }, str(skill.description)) : null,
        skill.problem ? el("p", { className: "error-text" }, `Invalid entry, not loadable: ${str(skill.problem)}`) : null,
        skill.dynamic ? el("p", { className: "muted" }, 'Files: "dynamic" (generated content, no digests to verify against).') : null,
        rows.length ? el("table", { className: "skill-files" }, el("tbody", null, rows)) : null,
        el("details", { className: "more" }, el("summary", null, "frontmatter"), el("pre", null, pretty(skill.frontmatter))),
      ),
    );
    pane.appendChild(out);
  }

  // ---------------------------------------------------------------- pending requests (elicitation, sampling)

  function showPending(p) {
    if (state.pendingCards.has(p.id)) return;
    const params = isObject(p.params) ? p.params : {};
    const errorLine = el("p", { className: "error-text", hidden: true });
    const answer = async (body) => {
      try {
        await api("answer", { id: p.id, ...body });
        removePending(p.id);
      } catch (e) {
        errorLine.hidden = false;
        errorLine.textContent = e.message;
      }
    };
    const task = isObject(p.task) ? p.task : null;
    const forTask = task
      ? el(
          "div",
          { className: "muted small pending-task" },
          "for task ",
          el("code", null, str(task.taskId)),
          task.tool ? ` (${str(task.tool)})` : "",
          " · the answer is sent with tasks/update ",
          el("button", { type: "button", className: "small-btn", onclick: () => showTaskInPanel(str(task.taskId)) }, "Show task"),
        )
      : null;
    let card;
    if (p.kind === "elicitation") {
      const urlMode = params.mode === "url";
      const form = urlMode ? null : schemaForm(params.requestedSchema, "elicit");
      card = el(
        "form",
        {
          className: "card pending-card",
          dataset: { pending: p.id, kind: p.kind, ...(task ? { taskId: str(task.taskId) } : {}) },
          autocomplete: "off",
          onsubmit: (ev) => {
            ev.preventDefault();
            if (urlMode) return answer({ action: "accept" });
            const content = form.collect();
            if (content !== null) answer({ action: "accept", content });
          },
        },
        el("div", { className: "kind" }, urlMode ? "The server asks you to open a URL" : "The server asks for input (elicitation)"),
        forTask,
        el("div", { className: "ask" }, str(params.message)),
        urlMode ? el("div", null, el("div", { className: "muted small" }, "URL (not opened by the inspector — check it before you visit it):"), el("pre", { className: "mono" }, str(params.url))) : form.element,
        el(
          "div",
          { className: "buttons" },
          el("button", { type: "submit", className: "primary" }, urlMode ? "Done (accept)" : "Accept"),
          el("button", { type: "button", onclick: () => answer({ action: "decline" }) }, "Decline"),
          el("button", { type: "button", onclick: () => answer({ action: "cancel" }) }, "Cancel"),
        ),
        errorLine,
      );
    } else {
      const messages = Array.isArray(params.messages) ? params.messages : [];
      const reply = el("textarea", { rows: 4, name: "reply", spellcheck: true, placeholder: "The model's reply" });
      const model = el("input", { type: "text", name: "model", value: "mcpkit-inspector" });
      card = el(
        "form",
        {
          className: "card pending-card",
          dataset: { pending: p.id, kind: p.kind, ...(task ? { taskId: str(task.taskId) } : {}) },
          autocomplete: "off",
          onsubmit: (ev) => {
            ev.preventDefault();
            answer({ action: "accept", text: reply.value, model: model.value });
          },
        },
        el("div", { className: "kind" }, "The server asks for a model completion (sampling)"),
        forTask,
        params.systemPrompt ? el("div", null, el("div", { className: "muted small" }, "system prompt"), el("pre", null, str(params.systemPrompt))) : null,
        messages.map((m) => el("div", { className: "message" }, el("div", { className: "role" }, str(m.role)), Array.isArray(m.content) ? m.content.map(contentBlock) : contentBlock(m.content))),
        el("div", { className: "muted small" }, `maxTokens ${params.maxTokens}${params.temperature !== undefined ? ` · temperature ${params.temperature}` : ""}`),
        el("label", { className: "field" }, "Reply", reply),
        el("label", { className: "field" }, "Model name", model),
        el("div", { className: "buttons" }, el("button", { type: "submit", className: "primary" }, "Send reply"), el("button", { type: "button", className: "danger", onclick: () => answer({ action: "decline" }) }, task ? "Reject (cancels the task)" : "Reject")),
        errorLine,
      );
    }
    state.pendingCards.set(p.id, card);
    $("pending-area").appendChild(card);
    card.scrollIntoView({ block: "nearest" });
  }

  function removePending(id) {
    const card = state.pendingCards.get(id);
    if (card) card.remove();
    state.pendingCards.delete(id);
  }

  // ---------------------------------------------------------------- traffic, notifications, stderr

  const MAX_ROWS = 3000;
  let trafficCount = 0;
  let notificationCount = 0;

  function stickToBottom(panel, fn) {
    const atBottom = panel.scrollHeight - panel.scrollTop - panel.clientHeight < 40;
    fn();
    if (atBottom) panel.scrollTop = panel.scrollHeight;
  }

  function trafficMethod(entry) {
    const key = (direction, id) => `${direction}:${typeof id}:${id}`;
    if (entry.kind === "request") {
      state.methodsById.set(key(entry.direction, entry.id), entry.method);
      if (state.methodsById.size > 20000) state.methodsById.clear();
      return entry.method;
    }
    if ((entry.kind === "response" || entry.kind === "error") && entry.id !== undefined) {
      const other = entry.direction === "out" ? "in" : "out";
      const method = state.methodsById.get(key(other, entry.id));
      return method ? `↳ ${method}` : "";
    }
    return entry.method || "";
  }

  function addTraffic(event) {
    const entry = event.data;
    const method = trafficMethod(entry);
    const body = $("traffic-body");
    const row = el(
      "tr",
      { className: `entry kind-${entry.kind}`, dataset: { method: method.replace(/^↳ /, ""), kind: entry.kind, direction: entry.direction } },
      el("td", null, fmtTime(event.time)),
      el("td", { className: entry.direction === "out" ? "dir-out" : "dir-in", title: entry.direction === "out" ? "inspector → server" : "server → inspector" }, entry.direction === "out" ? "→" : "←"),
      el("td", null, entry.kind),
      el("td", null, method),
      el("td", null, entry.id === undefined ? "" : String(entry.id)),
      el("td", null, fmtMs(entry.durationMs)),
      el("td", null, fmtSize(entry.size)),
    );
    row.addEventListener("click", () => {
      const next = row.nextSibling;
      if (next && next.classList && next.classList.contains("detail")) {
        next.remove();
        return;
      }
      const text = entry.message !== undefined ? pretty(entry.message) : `${entry.preview || ""}${entry.truncated ? "\n… (truncated)" : ""}`;
      row.after(el("tr", { className: "detail" }, el("td", { colSpan: 7 }, el("pre", null, text))));
    });
    applyFilter(row);
    stickToBottom($("dock-traffic"), () => {
      body.appendChild(row);
      while (body.childNodes.length > MAX_ROWS) body.removeChild(body.firstChild);
    });
    $("traffic-count").textContent = String(++trafficCount);
  }

  function applyFilter(row) {
    const q = $("traffic-filter").value.trim().toLowerCase();
    if (!row.classList.contains("entry")) return;
    row.hidden = q !== "" && !(row.dataset.method || "").toLowerCase().includes(q) && !(row.dataset.kind || "").includes(q);
  }

  function addLogLine(time, method, text, cls) {
    const list = $("notifications-list");
    stickToBottom($("dock-notifications"), () => {
      list.appendChild(el("li", { className: cls || "" }, el("span", { className: "t" }, fmtTime(time)), el("span", { className: "m" }, method), el("span", { className: "d" }, text)));
      while (list.childNodes.length > MAX_ROWS) list.removeChild(list.firstChild);
    });
    $("notifications-count").textContent = String(++notificationCount);
  }

  function onNotification(event) {
    const { method, params } = event.data;
    const p = isObject(params) ? params : {};
    if (method === "notifications/message") {
      const level = str(p.level);
      const text = `[${level}]${p.logger ? ` ${str(p.logger)}:` : ""} ${typeof p.data === "string" ? p.data : pretty(p.data)}`;
      addLogLine(event.time, "log", text, `level-${level}`);
    } else {
      addLogLine(event.time, method, Object.keys(p).length ? pretty(p) : "");
    }
    if (!event.replayed) {
      if (method === "notifications/tools/list_changed") {
        $("tools-changed").hidden = false;
        loadTools();
      } else if (method === "notifications/resources/list_changed") {
        $("resources-changed").hidden = false;
        loadResources();
      } else if (method === "notifications/prompts/list_changed") {
        $("prompts-changed").hidden = false;
        loadPrompts();
      }
    }
  }

  function note(text) {
    addLogLine(Date.now() / 1000, "inspector", text);
  }

  function addStderr(text) {
    const pre = $("stderr-log");
    stickToBottom($("dock-stderr"), () => {
      pre.appendChild(document.createTextNode(shownBidi(text)));
      if (pre.textContent.length > 200000) pre.textContent = pre.textContent.slice(-100000);
    });
  }

  // ---------------------------------------------------------------- live events

  function dispatch(kind, event) {
    const replayed = event.seq <= state.lastStateSeq;
    event.replayed = replayed;
    switch (kind) {
      case "traffic":
        addTraffic(event);
        break;
      case "notification":
        onNotification(event);
        break;
      case "progress":
        if (!replayed) onProgress(event.data);
        if (event.data.message || event.data.total) addLogLine(event.time, "progress", `${event.data.progress}${event.data.total ? ` / ${event.data.total}` : ""} ${str(event.data.message)}`);
        break;
      case "pending":
        if (!replayed) showPending(event.data);
        break;
      case "resolved":
        removePending(event.data.id);
        if (!replayed) note(`${event.data.kind} request ${event.data.outcome}${isObject(event.data.task) ? ` (task ${str(event.data.task.taskId)})` : ""}`);
        break;
      case "task":
        // The snapshot holds the tasks as of its sequence number; older events are history.
        if (!replayed) onTask(event.data);
        break;
      case "task_forgotten":
        if (!replayed) onTaskForgotten(event.data.taskId);
        break;
      case "status":
        if (!replayed) {
          const wasConnected = state.status === "connected";
          setStatus(event.data.status, event.data.server, event.data.error);
          if (!wasConnected && event.data.status === "connected") loadEverything();
        }
        break;
      case "spawn":
        addStderr(`$ ${event.data.argv.map(shellQuote).join(" ")}\n`);
        break;
      case "stderr":
        addStderr(event.data.text);
        break;
      case "cleared":
        clear($("traffic-body"));
        clear($("notifications-list"));
        trafficCount = notificationCount = 0;
        $("traffic-count").textContent = $("notifications-count").textContent = "";
        break;
      case "gap":
        note("some older events were dropped (the log is bounded)");
        break;
      default:
        break;
    }
  }

  async function followEvents() {
    let last = 0;
    for (;;) {
      try {
        const res = await fetch("/api/events", {
          headers: { Authorization: `Bearer ${token}`, "Last-Event-ID": String(last) },
          cache: "no-store",
          credentials: "omit",
        });
        if (res.status === 401) {
          showTokenBanner();
          $("events-state").textContent = "events: no token";
          return;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        $("events-state").textContent = "live";
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            let kind = "message";
            const data = [];
            for (const line of block.split("\n")) {
              if (!line || line.startsWith(":")) continue;
              const colon = line.indexOf(":");
              const field = colon < 0 ? line : line.slice(0, colon);
              let v = colon < 0 ? "" : line.slice(colon + 1);
              if (v.startsWith(" ")) v = v.slice(1);
              if (field === "id") last = Number(v) || last;
              else if (field === "event") kind = v;
              else if (field === "data") data.push(v);
            }
            if (!data.length) continue;
            try {
              const event = JSON.parse(data.join("\n"));
              dispatch(kind, kind === "gap" ? { seq: last, time: Date.now() / 1000, data: {} } : event);
            } catch (e) {
              console.error("bad event", e);
            }
          }
        }
      } catch (e) {
        /* fall through to reconnect */
      }
      $("events-state").textContent = "reconnecting…";
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  // ---------------------------------------------------------------- start

  function fillSelect(select, values, labels) {
    clear(select);
    values.forEach((v, i) => select.appendChild(el("option", { value: v }, labels ? labels[i] : v)));
  }

  function wireTabs(selector, attr, prefix) {
    const buttons = document.querySelectorAll(selector);
    buttons.forEach((button) =>
      button.addEventListener("click", () => {
        buttons.forEach((b) => {
          b.classList.toggle("active", b === button);
          const panel = $(`${prefix}${b.dataset[attr]}`);
          if (panel) panel.hidden = b !== button;
        });
      }),
    );
  }

  async function start() {
    wireTabs(".main .tabs button[data-tab]", "tab", "tab-");
    wireTabs(".dock-tabs button[data-dock]", "dock", "dock-");
    $("transport").addEventListener("change", setTransportFields);
    $("connect-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      connect();
    });
    $("disconnect-btn").addEventListener("click", disconnect);
    $("tools-refresh").addEventListener("click", loadTools);
    $("resources-refresh").addEventListener("click", loadResources);
    $("prompts-refresh").addEventListener("click", loadPrompts);
    $("skills-refresh").addEventListener("click", loadSkills);
    $("ping-btn").addEventListener("click", () => api("ping", {}).then((r) => note(`ping: ${fmtMs(r.durationMs)}`), (e) => note(`ping failed: ${e.message}`)));
    $("set-log-level").addEventListener("change", () => {
      const level = $("set-log-level").value;
      if (!level) return;
      api("logging/level", { level }).then(() => note(`log level set to ${level}`), (e) => note(`log level: ${e.message}`));
    });
    $("traffic-filter").addEventListener("input", () => document.querySelectorAll("#traffic-body tr.entry").forEach(applyFilter));
    $("clear-btn").addEventListener("click", () => api("clear", {}).catch((e) => note(e.message)));
    $("task-open-form").addEventListener("submit", openTask);
    $("token-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      token = $("token-input").value.trim();
      history.replaceState(null, "", `${location.pathname}#token=${encodeURIComponent(token)}`);
      location.reload();
    });
    setTransportFields();

    if (!token) {
      showTokenBanner();
      return;
    }
    let snapshot;
    try {
      snapshot = await api("state");
    } catch (e) {
      showError("connect-error", e);
      return;
    }
    fillSelect($("protocol"), snapshot.protocols, snapshot.protocols.map((p) => (p === "auto" ? "auto (detect)" : p)));
    fillSelect($("log-level"), ["", ...snapshot.logLevels], ["(none)", ...snapshot.logLevels]);
    fillSelect($("set-log-level"), ["", ...snapshot.logLevels], ["(not set)", ...snapshot.logLevels]);
    $("log-level").value = "info";
    fillConnectForm(snapshot.connection || snapshot.defaults);
    if (snapshot.connection) $("set-log-level").value = snapshot.connection.logLevel || "";
    state.lastStateSeq = snapshot.lastEventSeq;
    setStatus(snapshot.status, snapshot.server, snapshot.error);
    for (const task of snapshot.tasks || []) onTask(task);
    for (const p of snapshot.pending) showPending(p);
    followEvents();
    if (snapshot.status === "connected") {
      loadEverything();
    } else if (snapshot.autoConnect && snapshot.defaults) {
      connect();
    }
  }

  document.addEventListener("DOMContentLoaded", start);
})();

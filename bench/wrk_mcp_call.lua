-- wrk script for bench/http_bench.py: every request POSTs an MCP `tools/call` of the `echo` tool with a
-- unique JSON-RPC id, and every response is checked.
--
--   wrk -t1 -c16 -d5s --timeout 5s -s bench/wrk_mcp_call.lua http://127.0.0.1:PORT/mcp -- ERA [SESSION_ID]
--
-- ERA is `legacy` (MCP-Protocol-Version: 2025-11-25, plus Mcp-Session-Id when SESSION_ID is given and not
-- "-") or `modern` (2026-07-28: the `_meta` envelope in the body and the MCP-Protocol-Version, Mcp-Method and
-- Mcp-Name headers).
--
-- A response is good when its status is 200, its body (JSON or SSE) holds `"id":N` for an id this thread
-- sent and has not seen answered before, holds the echoed `"text":"hello, world"`, and holds neither
-- `"isError":true` nor `"error":`. done() prints one line, `WRK_RESULT {json}`, with wrk's counters, the
-- latency percentiles (µs) and the number of responses checked and found bad; wrk's own report comes first.
-- Use -t1: the id counter and the seen-set live in the (single) thread's Lua state.

TEXT = "hello, world"
EXPECT = '"text":"' .. TEXT .. '"'

-- Per-thread globals (read back in done() through thread:get).
sent = 0
checked = 0
bad = 0
first_bad = ""

local seen = {}
local prefix = '{"jsonrpc":"2.0","id":'
local suffix

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

function init(args)
   local era = args[1] or "legacy"
   local session = args[2]
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["Accept"] = "application/json, text/event-stream"
   local params
   if era == "modern" then
      wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
      wrk.headers["Mcp-Method"] = "tools/call"
      wrk.headers["Mcp-Name"] = "echo"
      params = '{"name":"echo","arguments":{"text":"' .. TEXT .. '"},"_meta":{'
         .. '"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
         .. '"io.modelcontextprotocol/clientCapabilities":{},'
         .. '"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"4"}}}'
   elseif era == "legacy" then
      wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
      if session ~= nil and session ~= "" and session ~= "-" then
         wrk.headers["Mcp-Session-Id"] = session
      end
      params = '{"name":"echo","arguments":{"text":"' .. TEXT .. '"}}'
   else
      error("unknown era: " .. tostring(era))
   end
   suffix = ',"method":"tools/call","params":' .. params .. '}'
end

function request()
   sent = sent + 1
   return wrk.format("POST", nil, nil, prefix .. sent .. suffix)
end

local function good(status, body)
   if status ~= 200 or body == nil then
      return false
   end
   local id = tonumber(string.match(body, '"id"%s*:%s*(%d+)'))
   if id == nil or id < 1 or id > sent or seen[id] then
      return false
   end
   if not string.find(body, EXPECT, 1, true) then
      return false
   end
   if string.find(body, '"isError":true', 1, true) or string.find(body, '"error":', 1, true) then
      return false
   end
   seen[id] = true
   return true
end

function response(status, headers, body)
   checked = checked + 1
   if not good(status, body) then
      bad = bad + 1
      if first_bad == "" then
         first_bad = tostring(status) .. " " .. string.sub(tostring(body), 1, 300)
      end
   end
end

local function json_string(s)
   s = string.gsub(s, '[%c"\\]', function(c)
      return string.format("\\u%04x", string.byte(c))
   end)
   return '"' .. s .. '"'
end

function done(summary, latency, requests)
   local t_sent, t_checked, t_bad, t_first = 0, 0, 0, ""
   for _, thread in ipairs(threads) do
      t_sent = t_sent + thread:get("sent")
      t_checked = t_checked + thread:get("checked")
      t_bad = t_bad + thread:get("bad")
      if t_first == "" then
         t_first = thread:get("first_bad")
      end
   end
   local e = summary.errors
   io.write(string.format(
      'WRK_RESULT {"duration_us":%d,"requests":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,'
         .. '"status":%d,"timeout":%d,"sent":%d,"checked":%d,"bad":%d,"p50_us":%.1f,"p90_us":%.1f,'
         .. '"p99_us":%.1f,"p999_us":%.1f,"max_us":%.1f,"mean_us":%.1f,"first_bad":%s}\n',
      summary.duration, summary.requests, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
      t_sent, t_checked, t_bad, latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency:percentile(99.9), latency.max, latency.mean, json_string(t_first)))
end

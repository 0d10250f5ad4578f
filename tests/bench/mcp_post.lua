-- wrk script: every request is one JSON-RPC POST to toolwarden's MCP endpoint.
-- Environment: TW_TOKEN (a live job's bearer token), TW_BODY (the JSON-RPC request body).
local token = os.getenv("TW_TOKEN")
local body = os.getenv("TW_BODY")
if token == nil or body == nil then
  error("mcp_post.lua needs TW_TOKEN and TW_BODY in the environment")
end
wrk.method = "POST"
wrk.body = body
wrk.headers["Authorization"] = "Bearer " .. token
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"

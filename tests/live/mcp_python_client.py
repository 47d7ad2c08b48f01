"""The seed-000 program flow through the Python MCP SDK 2.x (mcp 2.3.0) over stdio.

Run by tests/live/mcp_python_test.ts: argv[1] is JSON {command, args, env, cwd, template}
naming the real `isx mcp`; argv[2] `modern` pins 2026-07-28 (mcp.Client) instead of the
handshake (ClientSession). Each tool result is printed as one JSON line
{"tool": name, "result": {...}} (wire names: structuredContent, isError, _meta) and each
`notifications/isx/task_changed` as {"notification": params}, so the Deno test checks them
against the golden schemas with the same validator the other MCP tests use. The script
asserts only what it needs to go on; the Deno side judges.
"""

import asyncio
import json
import sys

import anyio
from mcp import Client, ClientSession, StdioServerParameters, types
from mcp.client.extension import NotificationBinding
from mcp.client.stdio import stdio_client
from pydantic import BaseModel, ConfigDict


def emit(obj):
    print(json.dumps(obj), flush=True)


class Change(BaseModel):
    """The params of notifications/isx/task_changed, kept whole (the Deno side checks them)."""

    model_config = ConfigDict(extra="allow")


class IsxSession(ClientSession):
    """A ClientSession advertising the experimental capability isx/task_changed."""

    def _build_capabilities(self, version):
        caps = super()._build_capabilities(version)
        return caps.model_copy(update={"experimental": {"isx/task_changed": {}}})


async def modern(cfg):
    """Stateless 2026-07-28 (mcp.Client pinned): no handshake; task changes by wait_any."""
    params = StdioServerParameters(
        command=cfg["command"], args=cfg["args"], env=cfg["env"], cwd=cfg["cwd"]
    )
    info = types.Implementation(name="isx-py-test", version="1.0.0")
    async with Client(params, mode="2026-07-28", client_info=info) as client:
        emit({"protocol": client.session.protocol_version})

        async def call(name, args=None):
            r = await client.call_tool(name, args or {})
            d = r.model_dump(by_alias=True, exclude_none=True, mode="json")
            emit({"tool": name, "result": d})
            return d.get("structuredContent") or {}

        await call("list_templates")
        key = {"template": cfg["template"], "name_hint": "pym", "idempotency_key": "py-modern-1"}
        name = (await call("create_instance", key))["instance"]
        try:
            bg = await call(
                "exec",
                {"instance": name, "command": "sleep 2; echo done; exit 3", "background": True},
            )
            await call("wait_any", {"task_ids": [bg["task_id"]], "timeout_seconds": 60})
            await call("task_result", {"task_id": bg["task_id"]})
            await call("create_instance", key)
        finally:
            await call("destroy_instance", {"instance": name})


async def main():
    cfg = json.loads(sys.argv[1])
    if len(sys.argv) > 2 and sys.argv[2] == "modern":
        return await modern(cfg)
    changes = []

    async def on_change(params):
        d = params.model_dump(by_alias=True, exclude_none=True, mode="json")
        changes.append(d)
        emit({"notification": d})

    params = StdioServerParameters(
        command=cfg["command"], args=cfg["args"], env=cfg["env"], cwd=cfg["cwd"]
    )
    async with stdio_client(params) as (read, write):
        async with IsxSession(
            read,
            write,
            notification_bindings=[
                NotificationBinding(
                    method="notifications/isx/task_changed", params_type=Change, handler=on_change
                )
            ],
            client_info=types.Implementation(name="isx-py-test", version="1.0.0"),
        ) as session:
            init = await session.initialize()
            emit({"initialize": init.model_dump(by_alias=True, exclude_none=True, mode="json")})

            async def call(name, args=None):
                r = await session.call_tool(name, args or {}, read_timeout_seconds=600)
                d = r.model_dump(by_alias=True, exclude_none=True, mode="json")
                emit({"tool": name, "result": d})
                return d.get("structuredContent") or {}

            await call("list_templates")
            key = {"template": cfg["template"], "name_hint": "py", "idempotency_key": "py-flow-1"}
            name = (await call("create_instance", {**key, "purpose": "python sdk test"}))["instance"]
            try:
                bg = await call(
                    "exec",
                    {"instance": name, "command": "sleep 2; echo done; exit 3", "background": True},
                )
                task = bg["task_id"]
                with anyio.fail_after(60):
                    while not any(
                        c.get("task_id") == task and c.get("state") == "finished" for c in changes
                    ):
                        await anyio.sleep(0.2)
                await call("task_result", {"task_id": task})
                await call("create_instance", key)
            finally:
                await call("destroy_instance", {"instance": name})


if __name__ == "__main__":
    asyncio.run(main())

"""A small MCP server for the gateway's tests, written with the PyPI `mcp` package (FastMCP),
over stdio. Its tools cover what the tool loop must handle: a result, a tool error, a crash
mid-call, a hang past the gateway's limit, a result over the size cap, and a tool list that
changes while the gateway holds it (`grow` adds `grown` and notifies the client).

`--no-tools` serves no tools at all.
"""

import os
import sys
import time

from mcp.server.fastmcp import Context, FastMCP

server = FastMCP("shardgate-test")

if "--no-tools" not in sys.argv:

    @server.tool()
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}, 21 C"

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails, with the reason given."""
        raise ValueError(f"refused: {reason}")

    @server.tool()
    def crash() -> str:
        """Exits the server in the middle of the call."""
        os._exit(3)

    @server.tool()
    def hang() -> str:
        """Never answers."""
        time.sleep(3600)
        return "late"

    @server.tool()
    def huge(size: int) -> str:
        """A result of `size` bytes."""
        return "x" * size

    def grown() -> str:
        """Exists once `grow` ran."""
        return "grown"

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Adds the tool `grown` and sends notifications/tools/list_changed."""
        server.add_tool(grown)
        await ctx.session.send_tool_list_changed()
        return "added grown"


if __name__ == "__main__":
    server.run("stdio")

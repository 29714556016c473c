"""The client."""

from .client import Client
from .dispatch import ClientHandlers
from .session import ClientSession
from .stdio import StdioServerParameters, stdio_client

__all__ = ["Client", "ClientHandlers", "ClientSession", "StdioServerParameters", "stdio_client"]

"""Adapters that plug Cordon (`cordon serve`) into agent frameworks.

Each framework's adapter lives in its own module and imports that framework only when it is
imported itself, so installing this package pulls in nothing but httpx:

- :mod:`cordon_adapters.openai_agents` - ``CordonComputer``, an OpenAI Agents SDK ``AsyncComputer``;
- :mod:`cordon_adapters.smolagents` - ``CordonExecutor``, a smolagents ``PythonExecutor``;
- :mod:`cordon_adapters.gym` - ``CordonEnv``, a Gymnasium ``Env`` over ``/v1/envs``.
"""

from .client import CordonError

__all__ = ["CordonError"]
__version__ = "0.1.0"

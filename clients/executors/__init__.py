"""Executors run a bound task on a device; see :mod:`clients.executors.base` for the interface."""

from clients.executors.base import Executor, Task, TaskResult
from clients.executors.registry import UnknownExecutor, load_executor

__all__ = ["Executor", "Task", "TaskResult", "UnknownExecutor", "load_executor"]

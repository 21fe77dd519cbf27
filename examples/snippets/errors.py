# Tool errors are exceptions the snippet can handle.
try:
    everything.get_sum(a=1, b="two")
except ToolError as e:
    result = f"caught: {e}"
result

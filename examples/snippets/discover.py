# What is connected, and what can it do?
servers = proxy.list_servers()
{s["name"]: [t["name"] for t in proxy.list_tools(server=s["name"])] for s in servers if s["status"] == "connected"}

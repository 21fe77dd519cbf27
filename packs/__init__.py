"""Local packs shipped with OneTool: one module per pack, its public functions are the tools."""

"""Sends ``query`` to every node for ``rounds`` rounds and prints the counts it gets back."""

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    for _ in range(2):
        nodes = list(grid.get_node_ids())
        replies = grid.send_and_receive([Message(RecordDict({"q": ConfigRecord({})}), n, "query") for n in nodes])
        print("COUNTS", sorted(int(r.content["reply"]["n"]) for r in replies), flush=True)

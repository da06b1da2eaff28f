// A thin client of `dagplan lsp`: every feature is the server's. YAML and JSON files are sent to it; it
// answers for plans and plan test files and leaves every other document alone (a workflow, a compose file).
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace.getConfiguration("dagplan").get("command");
  const folder = vscode.workspace.workspaceFolders && vscode.workspace.workspaceFolders[0];
  const server = { command, args, options: { cwd: folder ? folder.uri.fsPath : undefined } };
  client = new LanguageClient("dagplan", "dagplan", { run: server, debug: server }, {
    documentSelector: [{ scheme: "file", language: "yaml" }, { scheme: "file", language: "json" }],
  });
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };

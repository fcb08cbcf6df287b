// Validates the Kubernetes manifests given (YAML files, several documents each) against the
// Kubernetes API's own JSON schemas, as kubernetes-models carries them: every document's kind
// must be one the API has, and its fields, types and required fields what that kind takes.
// Usage: node validate.mjs FILE.yaml...; exit status 1 on the first invalid document.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

let failed = false;
for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (doc.errors.length > 0) {
      console.error(`${file}: ${doc.errors[0].message}`);
      failed = true;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    const where = `${file}: ${obj.kind ?? "?"} ${obj.metadata?.name ?? "?"}`;
    // "apps/v1" -> apps/v1/Deployment; "v1" -> v1/Service (the core group).
    const path = `kubernetes-models/${obj.apiVersion}/${obj.kind}`;
    let Model;
    try {
      Model = (await import(path)).default ?? (await import(path))[obj.kind];
    } catch {
      console.error(`${where}: no kind ${obj.kind} in ${obj.apiVersion}`);
      failed = true;
      continue;
    }
    try {
      new Model(obj).validate();
      console.log(`${where}: valid`);
    } catch (err) {
      console.error(`${where}: ${err.message}`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);

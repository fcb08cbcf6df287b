package quiver

// Version is the version of Quiver: what quiver version says, the info.version of the /v1
// API's OpenAPI document, and the newest section of CHANGELOG.md (Keep a Changelog) besides
// Unreleased. A release bumps it, tags the commit "v" + Version and commits the API's document
// as api/openapi-release.json, which later changes are checked against (see
// docs/API-COMPATIBILITY.md).
const Version = "0.1.0"

// Package interop drives the quiver binary with third-party clients, each pinned in this
// module's go.mod (or, for JavaScript, in .ci/run's npm packages) so that none of them enters
// Quiver's own: the mcp-go client at its default protocol version, the official TypeScript SDK
// (v2), which validates every answer against its schemas for the negotiated era, and the OpenAI
// Agents SDK for JavaScript's MCP servers, each over HTTP (quiver serve, keys on) and over stdio
// (quiver mcp stdio). Its tests build the binary
// from this repository and run it as a user does.
package interop

// Command securitysuite runs Quiver's security tests (the attacks of docs/SECURITY.md) and
// prints how many attacks were tried and how many held, per area and in total:
//
//	go run ./internal/cmd/securitysuite
//
// Each case is one test: a leaf subtest, or a test without subtests. Most cases are attacks;
// some are the legitimate use beside an attack (a name that must still be accepted, a host
// that must still be served), which a defence must not break. A case holds when its test
// passes; a failed or skipped case does not (a skipped one proved nothing), and the command
// then exits with status 1. The tests are the ordinary ones `go test ./...` runs:
// this command only selects and counts them, so the count cannot drift from what CI checks.
// It needs what those tests need: QUIVER_TEST_POSTGRES for the PostgreSQL cases (as .ci/run
// sets it).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
)

// area is a group of attacks: the tests of one package whose names match Run.
type area struct {
	Name    string
	Package string
	Run     string // a go test -run pattern
}

var areas = []area{
	{"sandbox: escapes, memory, runaway code, deadlines, worker processes", "./sandbox",
		"^(TestMemoryBombs|TestRunawayCode|TestNoHostCapabilities|TestNoSharedState|TestConcurrentRuns|TestHostStaysHealthy|TestDeadline.*|TestAbandoned.*|TestWorkers.*|TestWorkerEnvironmentIsEmpty)$"},
	{"run_code: limits and fair sharing", "./tools/runcode", "^(TestConcurrencyLimit|TestTimeoutCapped|TestFair.*|TestPerOwner.*|TestSlotHeld.*)$"},
	{"secret masking", ".", "^(TestSecretsMasked|TestSecretTransformationsMasked|TestSecretsMaskedOnTimeout|TestMaskingScope|TestMaskingCoversEveryField|TestNestedCallsInheritSecrets)$"},
	{"result size cap", ".", "^TestResultLimit"},
	{"tool names", ".", "^TestRegistryNames$"},
	{"MCP over HTTP: sessions, hosts, bad requests", "./mcp", "^(TestSessionLimits|TestSessionLimitWithTheSDKClient|TestSessionFloodMemory|TestRequestWithoutSession|TestRequestsThatOpenNoSessionTakeNoPlace|TestHostCheck|TestSessionPoolCapsHandlersTogether)$"},
	{"quiver serve and the CLI (secrets at every door, sessions, hosts, names, result cap, API keys, runs over the API, crashes)", "./cmd/quiver",
		"^(TestVariablesAtEveryDoor|TestServeSessionLimits|TestServeExposure|TestServeCapsResults|TestServeKillsOverrunningCode|TestToolsAddNames|TestServeAPIKeys|TestServeAPI|TestServeRuns|TestServeDecisions|TestServeEventsAndClientTools|TestServeCrashDuringRuns|TestServeSubagentDeferred|TestServeSubagentHandoff|TestSubagentCrashDuringTrees|TestServeRefusesForeignHostsOnEveryDoor|TestServeAllowedHostsFlagErrors)$"},
	{"sub-agents: privileges never widen, depth, paths across threads, scoped values kept from models", "./agent",
		"^(TestChildPolicyCeiling|TestSpawnDepthLimit|TestSpawnsPerRunCap|TestHandoffCutsTheTurn|TestPromptToolAttachments|TestSubagentResultAttachments|TestImmediateGroups|TestImmediateSecretScopedEnv|TestResumableUnknownAndTerminated|TestResumableCap|TestNestedCallExactlyOnce|TestDeferredSubagent)$"},
	{"stateful calls at the dispatcher: malformed or unenabled meta-fields refused before a tool runs, write-once under races", ".",
		"^(TestBadMetaFieldsAreRefusedBeforeTheToolRuns|TestOutputPathWritesThreadState|TestOutputPathRace|TestInstanceRoutesReadsAndWrites|TestEditsAndEdgesOfMetaFields|TestCallActivityRefused)$"},
	{"stateful calls in runs: writes survive kills, delegates see only their call, client results", "./agent",
		"^(TestRunWritesStateThroughOutputPath|TestDelegateRunsAnIsolatedRequest|TestStateWritesSurviveKills|TestClientResultWritesState)$"},
	{"stateful calls in the store: write rules, instances, workspaces, racing writers", "./store/sqlite", "^TestConformance/State.*$"},
	{"tool output as untrusted data: wrapped in every provider's request, never closed from inside, kept by delegates", "./agent",
		"^(TestUntrustedToolOutput|TestUntrustedToolOutputOnTheWire|TestUntrustedWrapping|TestDelegateKeepsUntrustedToolOutput)$"},
	{"API keys: authentication, roles, revocation", "./server", "^(TestAPIKeysAuthenticate|TestAPIKeysChangesTakeEffect)$"},
	{"entitlements: a key bound to a toolset calling outside it, case and Unicode variants, mapped names, hidden tools probed through errors and unlisted names, claims changing between requests, runs entitled as their caller", "./platform",
		"^(TestEntitlementAttacks|TestRunsAreEntitledAsTheirCaller|TestDelegatedRequestsAreEntitledAsTheirCaller|TestAdminsAreDecidedByTheRules)$"},
	{"entitlements of sub-agents: a child limited to its parent's caller and chain", "./agent", "^TestChildEntitledAsItsParentsCaller$"},
	{"limits: a user's limit across keys, tokens and sessions, tool-name variants, 200 calls at once, workspaces apart, members refused the document", "./platform",
		"^TestLimitAttacks$"},
	{"limits' documents and counts: malformed documents refused naming the part, no minute over the bound however calls fall, refused calls counted nowhere, a user across keys", "./platform/limits",
		"^(TestDocumentChecks|TestMeterHoldsEveryMinute|TestRefusedCallsCountNowhere|TestPerUserHoldsAcrossKeys|TestRetryAfterIsRight)$"},
	{"limits at every door and across a fleet: /v1 and MCP counted together, 429 with Retry-After, three nodes within the bound, concurrent calls held fleet-wide", "./server",
		"^(TestLimitsAtTheDoors|TestFleetLimitsHoldAcrossNodes|TestFleetConcurrentLimitHoldsAcrossNodes)$"},
	{"limits in agent runs: a run's calls counted as its caller's, a refusal the model reads", "./cmd/quiver", "^TestLimitsHoldInRuns$"},
	{"budgets: a user's tokens across keys, tokens and sub-agents, runs of no known caller bound as one, 50 runs at once, workspaces apart; a run stopped for its budget goes on without running a call again", "./platform",
		"^(TestBudgetAttacks|TestBudgetsInRuns)$"},
	{"connections: a state good once and in its browser alone (callback CSRF), a code replayed, a way back off the server, one person's token never another's, tokens sealed and masked, revoked on disconnect and on leaving, refreshed once, a token endpoint or an issuer on an internal address", "./platform",
		"^(TestConnections|TestConnectionRefusals|TestRunWaitsForAuthorization|TestConnectionsThroughTheIssuer)$"},
	{"connections at the doors: the flow over /v1 and a browser, a flow finished in another browser refused, MCP and /v1 calls with each person's own token, no token in any answer, log or span; remote MCP servers and A2A agents called with each person's own token, never through a session opened with another's", "./server",
		"^(TestConnectionsAtTheDoors|TestConnectionsOfRemoteServersAndAgents)$"},
	{"connections' providers: hostile token endpoints (endless, slow, huge tokens, other types, redirects, errors repeating the code), hostile issuers (another issuer's metadata, no PKCE, endpoints off https, slow), malformed documents refused naming the part", "./platform/connect",
		"^(TestHostileTokenEndpoints|TestProviderChecks|TestDiscovery|TestIssuerInTheDocument)$"},
	{"budgets' counts: the most specific budget of each kind, a request past a bound counted whole, refused until the window has room, model names with / priced", "./platform/limits",
		"^(TestModelRequests|TestPriceMatch)$"},
	{"usage: an admin's alone, every call at every door metered as the records say, made-up tool names folded into one, CSV cells never formulas", "./server",
		"^(TestUsageMatchesTheRecords|TestUsageCSVDefusesFormulas|TestLimitStatus)$"},
	{"usage's meter: bounded rows between writes whatever callers send, counts kept when the store is down, queries outside the bounds refused", "./platform/usage",
		"^(TestMeterBoundsItsRows|TestMeterKeepsWhatItCannotWrite|TestQueriesRefused)$"},
	{"usage in the store: one workspace's sums never another's, refused rows add nothing, concurrent writers lose nothing", "./store/postgres",
		"^TestUsage$"},
	{"entitlements at every HTTP door: keys bound to a toolset, viewers, denied keys and a token's claims at /mcp, /mcp/{toolset}, /v1 and agent runs; rules changed while sessions are open, on another node too; hidden stored tools not found", "./server",
		"^(TestEntitlementsMatrix|TestEntitlementsAtTheDoors|TestHiddenStoredToolIsNotFound|TestHiddenFunctionIsNotFound)$"},
	{"entitlements of stored tool records and functions: hidden ones listed, read, changed or deleted by no one they hide from", "./platform",
		"^(TestStoredToolRecordsFollowEntitlements|TestFunctionsFollowEntitlements)$"},
	{"entitlements' rules: deny wins, allow lists, toolsets, agents' chains, malformed documents refused naming the part", "./platform/entitle",
		"^(TestDecisions|TestDocumentsRefused)$"},
	{"access tokens of an identity provider: signatures, algorithms, issuer, audience, times, key ids, rules, workspaces", "./server",
		"^(TestAccessTokens|TestIssuerKeysRotate|TestTokensOnTheDoors|TestTokenCheckKeptNoLongerThanItsExpiry|TestIssuerTrouble|TestIDTokensRefused|TestTokensWaitForTheKeys|TestColdStartTokens)$"},
	{"quiver serve's identity-provider flags, and the console's sign-in nonce", "./cmd/quiver", "^(TestServeOIDCFlagsRefused|TestServeOIDCRequireATJWT|TestConsoleSignInNonce)$"},
	{"OpenAPI tools: only the source's servers (redirects too), path, query and header injection, credentials never arguments and masked in answers, bounds, documents that reach elsewhere", "./openapi",
		"^(TestAttacks|TestAttacksOnTheDocument|TestPublicOnly|TestHostileDocuments|TestPublicAddresses|TestLargeDocuments|TestBounds|TestRefused|TestCredentialsFromVariables|TestCredentialsReachTheService)$"},
	{"A2A agents imported as tools: keys sent only to the configured origin, cards pointing elsewhere refused, non-http URLs and bad names refused", "./a2a",
		"^(TestRemoteAgentRefused|TestRemoteAgentOrigins)$"},
	{"Quiver's agents over A2A: no call without a key, unknown tasks and other workspaces' runs not found, agents not exposed have no card", "./cmd/quiver",
		"^(TestServeAgentsOverA2A|TestA2ATasksStayInTheirWorkspace)$"},
	{"A2A runs read within their thread and workspace", "./jobs", "^TestRunStatusWithinItsThread$"},
	{"schemas: cost bounded by their graph ($ref lattices, recursion, defaults, validation steps), compilation stopped with its request", "./schema",
		"^(TestCompileRefLattice|TestCompileBounds|TestCompileContextCancelled|TestValidationSteps|TestDefaultsRecursiveAndShared|TestRenderRefLattice|TestCompileWrappedDocument)$"},
	{"schemas at the doors: /v1 tools, function versions, OpenAPI sources; OpenAPI refusals name no address, imports at once", "./server",
		"^(TestHostileSchemasRefused|TestOpenAPIRefusalsNameNoAddress|TestOpenAPIImportsAtOnce)$"},
	{"schemas in agent files", "./agent", "^TestLoadRefusesHostileSchemas$"},
	{"schemas of remote MCP tools", "./mcp", "^TestImportRefusesHostileSchemas$"},
	{"sessions of people at a remote MCP server: bounded, the least recent and the idle closed, none opened after shutdown", "./mcp", "^TestPeopleSessionsBounded$"},
	{"remote MCP tools across restarts and reconnections: calls wait for the connection, none lost or run twice", ".", "^TestCallWaitsForAToolWhoseSourceConnects$"},
	{"remote MCP tools across restarts and reconnections (the MCP client)", "./mcp", "^(TestStdioRemoteRestartsAfterACrash|TestRemoteDownThenUp)$"},
	{"remote MCP tools across restarts and reconnections (quiver serve killed during runs)", "./cmd/quiver", "^TestServeCrashDuringRemoteCalls$"},
	{"MCP resources and prompts: another workspace's thread files, traversal, keys", "./server",
		"^(TestMCPThreadFileResourcesRefused|TestMCPPromptsNeedKey)$"},
	{"the /v1 API: workspaces apart, roles, bad input, secrets never shown", "./server",
		"^(TestEntityAPI.*|TestThreadAPI.*|TestWorkspacesAreServedTheirOwnTools|TestWorkspaceToolsFollowTheStore|TestProblemsNameTheField|TestIsolation.*|TestAPIStatefulCalls|TestBodiesWithAmbiguousKeysAreRefused|TestEveryJSONBodyIsCheckedWhateverItsMediaType|TestEventStreamsAreCapped.*)$"},
}

// event is a line of go test -json.
type event struct {
	Action string
	Test   string
}

// result counts the attacks of an area.
type result struct {
	tried, held int
	failed      []string
}

func main() {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "area\tcases tried\theld")
	total := result{}
	for _, a := range areas {
		r, err := runArea(a)
		if err != nil {
			fmt.Fprintf(os.Stderr, "securitysuite: %s: %v\n", a.Name, err)
			os.Exit(2)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\n", a.Name, r.tried, r.held)
		total.tried += r.tried
		total.held += r.held
		total.failed = append(total.failed, r.failed...)
	}
	fmt.Fprintf(w, "total\t%d\t%d\n", total.tried, total.held)
	w.Flush()
	fmt.Printf("security suite: %d attacks (and the legitimate uses beside them) tried, %d held\n", total.tried, total.held)
	if len(total.failed) > 0 {
		fmt.Printf("did not hold (failed or skipped): %s\n", strings.Join(total.failed, ", "))
		os.Exit(1)
	}
}

// runArea runs an area's tests and counts their leaf cases.
func runArea(a area) (result, error) {
	cmd := exec.Command("go", "test", "-count=1", "-json", "-run", a.Run, a.Package)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && len(out) == 0 {
		return result{}, fmt.Errorf("go test: %v\n%s", err, stderr.String())
	}
	outcome := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" {
			continue
		}
		switch e.Action {
		case "pass", "fail", "skip":
			outcome[e.Test] = e.Action
		}
	}
	parents := map[string]bool{} // tests with subtests: the subtests are the attacks
	names := make([]string, 0, len(outcome))
	for n := range outcome {
		names = append(names, n)
		for i := strings.IndexByte(n, '/'); i >= 0; i = nextSlash(n, i) {
			parents[n[:i]] = true
		}
	}
	slices.Sort(names)
	var r result
	for _, n := range names {
		if parents[n] {
			continue
		}
		r.tried++
		if outcome[n] == "pass" {
			r.held++
		} else {
			r.failed = append(r.failed, a.Package+" "+n+" ("+outcome[n]+")")
		}
	}
	if r.tried == 0 {
		return r, fmt.Errorf("no test matched %s in %s: the suite's list is out of date", a.Run, a.Package)
	}
	return r, nil
}

func nextSlash(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

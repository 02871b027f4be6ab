// Package toolresults makes a plugin module export hangar_tool_result (abi's "Client-side
// tools"), served by the registered harness's sdk.ToolResulter. Import it for its effect from
// the plugin's main package, beside sdk.Register:
//
//	import _ "github.com/hangar-dev/hangar/harnesses/sdk/toolresults"
//
// The export lives here rather than in package sdk because a //go:wasmexport is in every module
// that links its package, and a module without the export is how the host learns that a harness
// takes no client tool results.
package toolresults

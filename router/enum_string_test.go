package router

import (
	"fmt"
	"testing"
)

// Every enum names a value the schema does not define as "kind(N)": the
// generic name function printed it with %v, which called String again,
// and an undefined value (the zero of a field a record built in code left
// unset) overflowed the stack — a fatal error, the process ended.
func TestUndefinedEnumValuesHaveNames(t *testing.T) {
	tests := []struct {
		v    fmt.Stringer
		want string
	}{
		{RejectReason(0), "rejectReason(0)"},
		{TopologyKind(200), "topologyKind(200)"},
		{ClientServerRole(0), "role(0)"},
		{clientServerDirection(9), "direction(9)"},
		{RuntimeState(250), "runtimeState(250)"},
		{ObjectRole(77), "objectRole(77)"},
		{StatefulObjectKind(0), "objectKind(0)"},
		{RelocationPolicy(250), "relocationPolicy(250)"},
		{TerminalResult(1 << 31), "terminalResult(2147483648)"},
		{FrameworkErrorCode(1 << 30), "frameworkError(1073741824)"},
		{MeshOperationKind(9999), "operationKind(9999)"},
		{ActorJoinResult(9999), "joinResult(9999)"},
		{CreateResult(0), "createResult(0)"},
		{InstanceRouteKind(0), "routeKind(0)"},
		{InstanceOperationKind(0), "operationKind(0)"},
		{RelocationRole(0), "relocationRole(0)"},
		{RouteAction(0), "action(0)"},
		{ObjectKind(0), "objectKind(0)"},
		{RelocationOutcome(0), "outcome(0)"},
		{RelocationFailure(250), "failure(250)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.v.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

package transport

import (
	"slices"
	"testing"

	"github.com/meshnode/meshnode/router"
)

// A node's extra protocol capabilities reach its peers in the admission
// (sorted, unique, with the required one and the transport's own) and
// PeerInfo.Has reads them.
func TestCapabilitiesReachThePeer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"none", nil, []string{router.RequiredProtocolCapability, router.CapabilityLinkSequence}},
		{"one", []string{"meshnode-x-v1"}, []string{router.RequiredProtocolCapability, router.CapabilityLinkSequence, "meshnode-x-v1"}},
		{"unsorted, repeated, the required one again", []string{"zz-v1", "meshnode-x-v1", "zz-v1", router.RequiredProtocolCapability},
			[]string{router.RequiredProtocolCapability, router.CapabilityLinkSequence, "meshnode-x-v1", "zz-v1"}},
		{"sorting before the required one", []string{"a-v1"}, []string{"a-v1", router.RequiredProtocolCapability, router.CapabilityLinkSequence}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfgB := testConfig("b", 7)
			cfgB.Capabilities = tc.extra
			b := startNode(t, cfgB)
			a := startNode(t, testConfig("a", 3))
			info := connectAndWait(t, a, b)
			if got := info.Admission.Extension.ProtocolCapabilities; !slices.Equal(got, tc.want) {
				t.Fatalf("admitted with %q, want %q", got, tc.want)
			}
			for _, c := range tc.want {
				if !info.Has(c) {
					t.Fatalf("Has(%q) = false", c)
				}
			}
			if info.Has("meshnode-absent-v1") {
				t.Fatal("Has reports a capability the peer did not list")
			}
		})
	}
	if (PeerInfo{}).Has(router.RequiredProtocolCapability) {
		t.Fatal("a peer without an admission has a capability")
	}
}

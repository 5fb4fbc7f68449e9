package mesh

import (
	"net"
	"strings"
	"testing"
	"time"
)

// What the transport refuses shows in /metrics: a connection that fails
// its ZMTP handshake (here garbage for a greeting; with CURVE, a key not in
// the allow-list or a plain node) counts in
// meshnode_transport_handshake_failures_total. Before, the transport
// counted handshake failures, rejected hellos, refused connections and
// liveness timeouts but nothing exported them: an operator had only the
// log, which keeps 10 lines per 10 s (an operator try-out).
func TestAdminMetricsCountRefusedConnections(t *testing.T) {
	c := adminCluster(t, 2)
	_, body := c.adminGet(t, 1, "/metrics")
	for _, family := range []string{"meshnode_transport_handshake_failures_total", "meshnode_transport_hellos_rejected_total",
		`meshnode_transport_inbound_refused_total{limit="max_unadmitted"}`, `meshnode_transport_inbound_refused_total{limit="max_inbound_conns"}`,
		"meshnode_transport_inbound_evicted_total", "meshnode_transport_readouts_cut_total",
		"meshnode_transport_liveness_timeouts_total", "meshnode_transport_duplicate_records_total"} {
		if !strings.Contains(body, family) {
			t.Fatalf("/metrics has no %s", family)
		}
	}
	before := metricValue(body, "meshnode_transport_handshake_failures_total")
	addr := strings.TrimPrefix(c.nodes[1].Transport().AdvertisedEndpoint(), "tcp://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte(strings.Repeat("not a ZMTP greeting ", 10)))
	defer conn.Close()
	eventually(t, 10*time.Second, "the handshake failure in /metrics", func() bool {
		_, body := c.adminGet(t, 1, "/metrics")
		return metricValue(body, "meshnode_transport_handshake_failures_total") >= before+1
	})
}

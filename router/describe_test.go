package router

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestDescribeJSON(t *testing.T) {
	meta, err := EncodeMetadata([]MetadataEntry{{"trace", "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		rec  *Record
		want map[string]any
	}{
		{
			name: "golden probe",
			rec:  &Record{Body: &LivenessProbe{72623859790382856}},
			want: map[string]any{"command": "livenessProbe", "commandId": 5.0, "exactToReference": true, "flags": 0.0,
				"flagNames": []any{}, "body": map[string]any{"probeId": "72623859790382856"}},
		},
		{
			name: "spotSend with metadata and payload",
			rec: NewRecord(&SpotSend{OperationID{0, 1}, 2, "src", SpotRouteFence{SpotRef{"room", 3}, []byte{0xab, 0x01}, 4, 5, 6}},
				meta, &Payload{"Chat", "text/plain", []byte("hi")}),
			want: map[string]any{"command": "spotSend", "commandId": 21.0, "exactToReference": true, "flags": 1.0,
				"flagNames": []any{"metadata"},
				"body": map[string]any{
					"operation": map[string]any{"high": "0", "low": "1"}, "messageFollowHopCount": 2.0, "sourceSpotId": "src",
					"targetSpot": map[string]any{"spot": map[string]any{"spotId": "room", "objectGeneration": "3"},
						"targetNodeRid": "ab01", "targetNodeGeneration": "4", "expectedAuthorityOwnerGeneration": "5",
						"expectedOwnerLeaseGeneration": "6"}},
				"metadata": map[string]any{"version": 1.0, "entries": []any{map[string]any{"key": "trace", "value": "abc"}}},
				"payload":  map[string]any{"version": 1.0, "packetName": "Chat", "contentType": "text/plain", "payload": "6869"},
			},
		},
		{
			name: "reply failure",
			rec:  &Record{Body: &Reply{Correlation: 4, Result: ResultConflict, FailureCode: FailSpotMoving}},
			want: map[string]any{"command": "reply", "commandId": 20.0, "exactToReference": true, "flags": 0.0, "flagNames": []any{},
				"body": map[string]any{"correlation": "4", "terminalResult": "conflict", "failureCode": "spotMoving"}},
		},
		{
			name: "own record",
			rec:  &Record{Body: &RelocationReady{1, RelocationID{0, 2}, 3, RelocationFailed, RelocationFailureChecksumMismatch, ""}},
			want: map[string]any{"command": "relocationReady", "commandId": 53.0, "exactToReference": false, "flags": 0.0, "flagNames": []any{},
				"body": map[string]any{"correlation": "1", "relocation": map[string]any{"high": "0", "low": "2"}, "targetAttempt": "3",
					"outcome": "failed", "failure": "checksumMismatch", "detail": ""}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			js, err := DescribeJSON(tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(js, &got); err != nil {
				t.Fatalf("%v\n%s", err, js)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got\n%s", js)
			}
		})
	}
}

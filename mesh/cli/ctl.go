package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/marker"
	"github.com/meshnode/meshnode/mesh/query"
	"github.com/meshnode/meshnode/mesh/record"
)

// ctlCommands is the table of "meshnode ctl" subcommands. To add one, write
// its file (a usage constant and a run function that parses its flags with
// newFlagSet and parseFlags, like ctlTopology) and add one row here: the
// ctl command list, "ctl help <name>" and the top-level summary follow
// from this table.
func ctlCommands() []command {
	return []command{
		{"key", "print a record's key preimage, store key and Redis key", ctlKey},
		{"record", "read one record from the Location Store and pretty-print it", ctlRecord},
		{"topology", "one row per MeshNode descriptor in the Location Store", ctlTopology},
		{"locate", "where an Actor or Spot is: generation, state, node, owner", ctlLocate},
		{"list", "paged list of the Actors or Spots of one kind", ctlList},
		{"reclaim", "remove the records of objects whose owner's lease has ended", ctlReclaim},
		{"status", "a node's status from its admin listener (admin.listen)", ctlStatus},
		{"relocate", "host Relocate or drain of a node through its admin listener, with progress", ctlRelocate},
		{"keygen", "generate a CURVE key pair for transport.curve", ctlKeygen},
	}
}

// ctlNames lists the ctl subcommands, for the top-level summary.
func ctlNames() []string {
	var names []string
	for _, c := range ctlCommands() {
		names = append(names, c.name)
	}
	return names
}

func ctlGroup() group {
	return group{
		name:     "meshnode ctl",
		synopsis: "<command> [arguments]",
		intro: "Operator tools. The commands that read a store, and key (for the namespace), take the\n" +
			"same configuration as 'meshnode run' (--config FILE, MESHNODE_ environment, configuration flags).",
		commands: ctlCommands(),
	}
}

func runCtl(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return ctlGroup().run(ctx, args, stdout, stderr)
}

const keyUsage = `usage: meshnode ctl key <record-kind> <fields...> [--namespace NS] [--config FILE] [config flags]

Prints a record's logical key preimage (NULs shown as \0), its hex, its store
key and its Redis key, to find the record by hand:

  key mesh-node <MeshName> <RoutingIdHex>
  key owner-lease <OwnerId>
  key client-server <ChannelName> <RoutingIdHex>
  key fanout-publisher <ChannelName> <RoutingIdHex>
  key authority <actor|spot> <Id>
  key counter <object-generation|lease-generation|descriptor-change:<kind>>
  key descriptor-journal mesh-node
  key removed-mesh-node <MeshName> <RoutingIdHex>
  key capacity <MeshName> <RoutingIdHex> <lifecycleGeneration> <actors|spots> <secured|active>
  key capacity <MeshName> <RoutingIdHex> <lifecycleGeneration> spotType <userSpot|instanceSpot> <StableType> <secured|active>

A node run's capacity counter is two rows: secured (reserved + active, what
its limit bounds) and active (docs/AUTHORITY.md §2.2).

The Redis key's namespace is location_store.redis.namespace, read from the
same configuration as 'meshnode run' (the file named by --config or
MESHNODE_CONFIG, then MESHNODE_ environment variables, then flags);
--namespace, when given, overrides it. Reads no store.`

const recordUsage = `usage: meshnode ctl record <key> [--config FILE] [config flags]

Reads one record from the configured Location Store and pretty-prints it with
its version, expiry and whether it decodes as its kind. <key> is a store key
(authority:<hex>) or a full Redis key ({ns}:k:authority:<hex>), whose namespace
must be the configured location_store.redis.namespace; 'meshnode ctl key'
computes it.
Exit status: 0 found, 1 missing or a store failure, 2 bad usage.`

const topologyUsage = `usage: meshnode ctl topology [--mesh NAME] [--config FILE] [config flags]

One row per MeshNode descriptor in the configured Location Store: mesh, RID,
endpoint, state, role, weight, capacity (active[+reserved]/limit) and lease
(time left by the store's clock, or "expired" when the node's owner lease is
gone: a crashed run, shown until the serving nodes reclaim its descriptor).
A run whose watchers removed its descriptor (its lease ended while its links
were up: paused past lease.ttl, or cut off from the store) is shown for an
hour with state "removed", from its removal record, until it publishes
again. With no descriptor to show, stdout stays empty and stderr says which
namespace and store were read (a wrong namespace or address, or --mesh, is
the usual cause); the exit status is 0 either way.`

func ctlKey(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("meshnode ctl key")
	fs.String("namespace", "", "Redis key namespace of the Location Store (default: location_store.redis.namespace of the configuration)")
	config.Flags(fs)
	if code, done := parseFlags(fs, args, helpText(fs, keyUsage, false), stdout, stderr); done {
		return code
	}
	pre, err := preimageFor(fs.Args())
	if err != nil {
		return usageError(stderr, fs.Name(), "%v", err)
	}
	ns, code, ok := keyNamespace(fs, stderr)
	if !ok {
		return code
	}
	fmt.Fprintf(stdout, "preimage:     %s\n", escapePreimage(pre))
	fmt.Fprintf(stdout, "preimage hex: %s\n", hex.EncodeToString(pre))
	fmt.Fprintf(stdout, "store key:    %s\n", record.Key(pre))
	fmt.Fprintf(stdout, "redis key:    %s\n", record.RedisKey(ns, pre))
	return ExitOK
}

// keyNamespace is the Location Store namespace ctl key prints the Redis key
// in: the configuration's, loaded as 'meshnode run' loads it (file, then
// environment, then configuration flags), or --namespace when given. A
// --namespace that contradicts --location_store.redis.namespace is a usage
// error rather than a silent choice between them.
func keyNamespace(fs *pflag.FlagSet, stderr io.Writer) (ns string, code int, ok bool) {
	const redisNS = "location_store.redis.namespace"
	flag := fs.Lookup("namespace")
	if flag.Changed {
		if c := fs.Lookup(redisNS); c != nil && c.Changed && c.Value.String() != flag.Value.String() {
			return "", usageError(stderr, fs.Name(), "--namespace %q and --%s %q disagree; give one of them",
				flag.Value.String(), redisNS, c.Value.String()), false
		}
	}
	cfg, ok := loadToolConfig(fs, stderr)
	if !ok {
		return "", ExitUsage, false
	}
	ns = cfg.LocationStore.Redis.Namespace
	if flag.Changed {
		ns = flag.Value.String()
	}
	if ns == "" {
		return "", usageError(stderr, fs.Name(), "the Location Store namespace is empty (%s, or --namespace)", redisNS), false
	}
	return ns, ExitOK, true
}

// preimageFor builds a logical key preimage from command-line fields.
func preimageFor(a []string) ([]byte, error) {
	want := func(n int, form string) error {
		if len(a) != n+1 {
			return fmt.Errorf("%s takes %d field(s): %s", a[0], n, form)
		}
		return nil
	}
	rid := func(s string) ([]byte, error) {
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("routing id %q is not hex: %w", s, err)
		}
		return b, nil
	}
	if len(a) == 0 {
		return nil, errors.New("missing record kind")
	}
	switch record.Kind(a[0]) {
	case record.KindMeshNode, record.KindClientServer, record.KindFanoutPublisher, record.KindRemovedMeshNode:
		if err := want(2, "<name> <RoutingIdHex>"); err != nil {
			return nil, err
		}
		r, err := rid(a[2])
		if err != nil {
			return nil, err
		}
		switch record.Kind(a[0]) {
		case record.KindMeshNode:
			return record.MeshNodePreimage(a[1], r)
		case record.KindClientServer:
			return record.ClientServerPreimage(a[1], r)
		case record.KindRemovedMeshNode:
			return record.RemovedMeshNodePreimage(a[1], r)
		}
		return record.FanoutPublisherPreimage(a[1], r)
	case record.KindOwnerLease:
		if err := want(1, "<OwnerId>"); err != nil {
			return nil, err
		}
		return record.OwnerLeasePreimage(a[1])
	case record.KindAuthority:
		if err := want(2, "<actor|spot> <Id>"); err != nil {
			return nil, err
		}
		return record.AuthorityPreimage(record.IdentityKind(a[1]), a[2])
	case record.KindCounter:
		if err := want(1, "<counter name>"); err != nil {
			return nil, err
		}
		name := strings.ReplaceAll(a[1], ":", "\x00")
		return record.CounterPreimage(record.CounterName(name))
	case record.KindDescriptorJournal:
		if err := want(1, "mesh-node"); err != nil {
			return nil, err
		}
		return record.DescriptorJournalPreimage(record.Kind(a[1]))
	case authority.KindCapacity:
		return capacityPreimage(a[1:], rid)
	}
	return nil, fmt.Errorf("unknown record kind %q", a[0])
}

// capacityPreimage is the preimage of one row of a capacity counter:
// <mesh> <rid> <generation> <actors|spots> <measure>, or <mesh> <rid>
// <generation> spotType <kind> <type> <measure>.
func capacityPreimage(f []string, rid func(string) ([]byte, error)) ([]byte, error) {
	const form = "<MeshName> <RoutingIdHex> <lifecycleGeneration> <actors|spots> <secured|active>, or ... spotType <userSpot|instanceSpot> <StableType> <secured|active>"
	if len(f) != 5 && len(f) != 7 {
		return nil, fmt.Errorf("capacity takes 5 or 7 fields: %s", form)
	}
	r, err := rid(f[1])
	if err != nil {
		return nil, err
	}
	gen, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("lifecycleGeneration %q is not a decimal number", f[2])
	}
	id := authority.CounterID{Node: authority.Node{MeshName: f[0], RoutingID: r, LifecycleGeneration: gen}, Class: authority.SlotClass(f[3])}
	if len(f) == 7 {
		id.SpotKind, id.StableType = record.ObjectKind(f[4]), f[5]
	}
	return authority.CapacityPreimage(id, authority.Measure(f[len(f)-1]))
}

// escapePreimage shows a preimage with its NUL separators visible.
func escapePreimage(p []byte) string {
	q := strconv.Quote(string(p))
	return strings.ReplaceAll(q, `\x00`, `\0`)
}

func ctlRecord(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("meshnode ctl record")
	config.Flags(fs)
	if code, done := parseFlags(fs, args, helpText(fs, recordUsage, false), stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, fs.Name(), "want exactly one key, got %d arguments", fs.NArg())
	}
	key, keyNS := storeKeyOf(fs.Arg(0))
	cfg, ok := loadToolConfig(fs, stderr)
	if !ok {
		return ExitUsage
	}
	// A full Redis key names its namespace: read in another one, the key
	// was reported missing, or another mesh's record was shown as the one
	// asked for (until 2026-12-07).
	if ns := cfg.LocationStore.Redis.Namespace; keyNS != "" && cfg.LocationStore.Provider == config.ProviderRedis && keyNS != ns {
		return usageError(stderr, fs.Name(), "the key is of namespace {%s}, and the Location Store is configured for %q "+
			"(location_store.redis.namespace): give --location_store.redis.namespace=%s to read it (the store key %s alone reads "+
			"namespace %q's record of that key, another one)", keyNS, ns, keyNS, key, ns)
	}
	st, err := openLocation(ctx, cfg, cfg.Logger(stderr))
	if err != nil {
		return storeFailed(stderr, fs.Name(), err)
	}
	defer st.Close()
	res, err := st.Read(ctx, key)
	if err != nil {
		return storeFailed(stderr, fs.Name(), fmt.Errorf("read %s: %w", key, err))
	}
	if !res.Found {
		fmt.Fprintf(stderr, "meshnode ctl record: %s: missing (store time %s)\n", key, res.StoreNow.UTC().Format(time.RFC3339Nano))
		return ExitError
	}
	fmt.Fprint(stdout, describeRecord(key, res))
	return ExitOK
}

// storeKeyOf accepts a store key or a full Redis key ({ns}:k:<store key>),
// and returns the store key and the Redis key's namespace ("" for a store
// key).
func storeKeyOf(k string) (key, ns string) {
	if strings.HasPrefix(k, "{") {
		if i := strings.Index(k, "}:k:"); i > 0 {
			return k[i+len("}:k:"):], k[1:i]
		}
	}
	return k, ""
}

// describeRecord renders a stored record: its store facts, whether it
// decodes as its kind, and the canonical JSON indented.
func describeRecord(key string, res locstore.ReadResult) string {
	var b strings.Builder
	kind, _, _ := strings.Cut(key, ":")
	fmt.Fprintf(&b, "key:        %s\nkind:       %s\nversion:    %s\n", key, kind, res.Version)
	if res.ExpiresAt.IsZero() {
		fmt.Fprintf(&b, "expires:    never (durable)\n")
	} else {
		fmt.Fprintf(&b, "expires:    %s (in %s by store time)\n", res.ExpiresAt.UTC().Format(time.RFC3339Nano), res.ExpiresAt.Sub(res.StoreNow).Round(time.Millisecond))
	}
	if err := decodeAs(record.Kind(kind), res.Value); errors.Is(err, errKeptState) {
		fmt.Fprintf(&b, "decode:     not a record: %v\n", err)
	} else if err != nil {
		fmt.Fprintf(&b, "decode:     FAILED: %v\n", err)
	} else {
		fmt.Fprintf(&b, "decode:     ok\n")
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, res.Value, "", "  ") == nil {
		fmt.Fprintf(&b, "%s\n", pretty.String())
	} else {
		fmt.Fprintf(&b, "raw (%d bytes): %q\n", len(res.Value), res.Value)
	}
	return b.String()
}

// errKeptState is decodeAs' answer for ctl list's kept continuation
// state, which is stored beside the records but is none.
var errKeptState = errors.New("ctl list's kept continuation state (docs/OPERATIONS.md, \"Kept continuation state\")")

func decodeAs(kind record.Kind, v []byte) error {
	var err error
	switch kind {
	case record.KindMeshNode:
		_, err = record.DecodeMeshNode(v)
	case record.KindOwnerLease:
		_, err = record.DecodeOwnerLease(v)
	case record.KindClientServer:
		_, err = record.DecodeClientServer(v)
	case record.KindFanoutPublisher:
		_, err = record.DecodeFanoutPublisher(v)
	case record.KindAuthority:
		_, err = record.DecodeAuthority(v)
	case record.KindCounter:
		_, err = record.DecodeCounter(v)
	case record.KindDescriptorJournal:
		_, err = record.DecodeDescriptorJournal(v)
	case record.KindRemovedMeshNode:
		_, err = record.DecodeRemovedMeshNode(v)
	case authority.KindCapacity:
		_, _, _, err = authority.DecodeCapacity(v)
	case authority.KindRelocationReservation:
		_, err = authority.DecodeReservation(v)
	case authority.KindCreationTerminal:
		_, err = authority.DecodeTerminal(v)
	case marker.Kind:
		_, err = marker.Decode(v)
	case query.KeptKind:
		// Not a record: ctl list's own continuation state (a store cursor
		// or rows, gob), which needs no decoding by hand.
		return errKeptState
	default:
		err = fmt.Errorf("not a framework record kind %q", kind)
	}
	return err
}

func ctlTopology(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("meshnode ctl topology")
	meshName := fs.String("mesh", "", "only this mesh (default: every mesh)")
	config.Flags(fs)
	if code, done := parseFlags(fs, args, helpText(fs, topologyUsage, false), stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, fs.Name(), "unexpected argument %q", fs.Arg(0))
	}
	st, log, cfg, code := ctlStoreConfig(ctx, fs, stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	lister := directory.Lister{Store: st, PageSize: 1000, Logger: log}
	snap, err := lister.List(ctx, *meshName)
	if err != nil {
		return storeFailed(stderr, fs.Name(), err)
	}
	// Runs whose watchers removed their descriptor (paused past their
	// lease, or cut off from the store with their links up) are missing
	// from the list; their removal records show them.
	removed, err := lister.ListRemoved(ctx, *meshName)
	if err != nil {
		return storeFailed(stderr, fs.Name(), err)
	}
	rows := directory.Rows(snap, removed...)
	if len(rows) == 0 {
		// A bare header read as a tool that had failed (an operator
		// try-out on an emptied namespace): say what was looked at.
		var others []string
		if *meshName != "" {
			all, err := lister.List(ctx, "")
			if err != nil {
				return storeFailed(stderr, fs.Name(), err)
			}
			others = meshNames(all)
		}
		fmt.Fprintf(stderr, "%s: %s\n", fs.Name(), noNodeText(cfg.LocationStore.Redis, *meshName, others))
		return ExitOK
	}
	if err := directory.RenderTable(stdout, rows); err != nil {
		fmt.Fprintf(stderr, "meshnode ctl topology: %v\n", err)
		return ExitError
	}
	return ExitOK
}

// noNodeText says that ctl topology found no descriptor: of mesh meshName
// (every mesh when "") in the store r names, with what to check; others
// are the meshes the namespace holds nodes of (with meshName set).
func noNodeText(r config.RedisConfig, meshName string, others []string) string {
	store := "Redis at " + strings.Join(r.Addrs, ",")
	if r.MasterName != "" {
		store = fmt.Sprintf("Redis master %q of the Sentinels at %s", r.MasterName, strings.Join(r.Addrs, ","))
	}
	if r.DB != 0 {
		store += fmt.Sprintf(", db %d", r.DB)
	}
	what := "no node is"
	if meshName != "" {
		what = fmt.Sprintf("no node of mesh %q is", meshName)
	}
	msg := fmt.Sprintf("%s registered in namespace %s of the Location Store (%s)", what, r.Namespace, store)
	if len(others) > 0 {
		q := make([]string, len(others))
		for i, m := range others {
			q[i] = strconv.Quote(m)
		}
		return msg + "; meshes there: " + strings.Join(q, ", ") + ": is --mesh right?"
	}
	return msg + "; if nodes run, compare location_store.redis.namespace and location_store.redis.addrs " +
		"(--config, --location_store.redis.namespace) with the nodes' configuration — or the store lost its data " +
		"(docs/OPERATIONS.md, store data lost)"
}

// meshNames lists the meshes of snap's descriptors, sorted, once each.
func meshNames(snap directory.Snapshot) []string {
	var out []string
	for _, e := range snap.Entries { // sorted by mesh name
		if m := e.Descriptor.MeshName; len(out) == 0 || out[len(out)-1] != m {
			out = append(out, m)
		}
	}
	return out
}

package record

// OwnerLease is the owner lease record of one host process run (spec §3.1),
// stored under OwnerLeasePreimage(OwnerID).
//
// The record carries no expiry: the lease's validity is the store key's
// retention (the Location Store SPI's PutExpiring), judged only by the
// store's clock and returned as ExpiresAt on every read. Writing an expiry
// into the value as well would create a second, possibly disagreeing,
// source of truth.
type OwnerLease struct {
	OwnerID         string
	LeaseGeneration Generation
	// AcquiredAt is the store time (StoreNow) observed when this
	// LeaseGeneration was issued. Informational.
	AcquiredAt EpochMillis
	// UpdatedAt is the store time observed at the latest write (claim or
	// renewal). Informational; renewals may keep or advance it.
	UpdatedAt EpochMillis
}

func (l *OwnerLease) validate() error {
	v := &val{kind: KindOwnerLease}
	v.name("ownerId", l.OwnerID)
	v.gen("leaseGeneration", l.LeaseGeneration)
	v.millis("acquiredAtEpochMs", l.AcquiredAt)
	v.millis("updatedAtEpochMs", l.UpdatedAt)
	return v.err
}

// Validate checks every field and the encoded size.
func (l OwnerLease) Validate() error {
	_, err := l.Encode()
	return err
}

// Encode returns the canonical JSON value.
func (l OwnerLease) Encode() ([]byte, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	root := jObjV(
		mem("recordVersion", jUintV(RecordVersion)),
		mem("ownerId", jStrV(l.OwnerID)),
		mem("leaseGeneration", jDecStrV(uint64(l.LeaseGeneration))),
		mem("acquiredAtEpochMs", jDecStrV(uint64(l.AcquiredAt))),
		mem("updatedAtEpochMs", jDecStrV(uint64(l.UpdatedAt))),
	)
	return finish(KindOwnerLease, encodeCanonical(root))
}

// Preimage is OwnerLeasePreimage(l.OwnerID).
func (l OwnerLease) Preimage() ([]byte, error) { return OwnerLeasePreimage(l.OwnerID) }

// DecodeOwnerLease reads an owner lease value. It accepts any well-formed
// JSON with exactly the record's members; use CheckCanonical to also demand
// the canonical bytes.
func DecodeOwnerLease(value []byte) (OwnerLease, error) {
	d, o, err := begin(KindOwnerLease, value)
	if err != nil {
		return OwnerLease{}, err
	}
	defer d.release()
	l := OwnerLease{
		OwnerID:         o.str("ownerId"),
		LeaseGeneration: o.gen("leaseGeneration"),
		AcquiredAt:      o.millis("acquiredAtEpochMs"),
		UpdatedAt:       o.millis("updatedAtEpochMs"),
	}
	o.end()
	if d.err != nil {
		return OwnerLease{}, d.err
	}
	if err := l.validate(); err != nil {
		return OwnerLease{}, err
	}
	return l, nil
}

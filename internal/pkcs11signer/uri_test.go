package pkcs11signer

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseURI(t *testing.T) {
	const mod = "?module-path=/usr/lib/softhsm/libsofthsm2.so"
	for _, c := range []struct {
		in   string
		want URI
	}{
		{"pkcs11:token=tablectl;object=checkpoint" + mod + "&pin-source=file:/etc/tablectl/hsm.pin",
			URI{ModulePath: "/usr/lib/softhsm/libsofthsm2.so", Token: "tablectl", Object: "checkpoint", PINFile: "/etc/tablectl/hsm.pin"}},
		{"pkcs11:token=My%20Token;id=%01%ff;type=private" + mod + "&pin-source=file:///run/pin",
			URI{ModulePath: "/usr/lib/softhsm/libsofthsm2.so", Token: "My Token", ID: []byte{1, 0xff}, PINFile: "/run/pin"}},
		{"pkcs11:serial=0123abcd;object=cp;type=public" + mod + "&pin-source=/etc/pin",
			URI{ModulePath: "/usr/lib/softhsm/libsofthsm2.so", Serial: "0123abcd", Object: "cp", PINFile: "/etc/pin"}},
		{"pkcs11:token=t;object=cp" + mod, URI{ModulePath: "/usr/lib/softhsm/libsofthsm2.so", Token: "t", Object: "cp"}},
	} {
		got, err := ParseURI(c.in)
		if err != nil {
			t.Errorf("ParseURI(%s): %v", c.in, err)
			continue
		}
		if got.ModulePath != c.want.ModulePath || got.Token != c.want.Token || got.Serial != c.want.Serial ||
			got.Object != c.want.Object || !bytes.Equal(got.ID, c.want.ID) || got.PINFile != c.want.PINFile {
			t.Errorf("ParseURI(%s) = %+v, want %+v", c.in, got, c.want)
		}
		again, err := ParseURI(got.String())
		if err != nil || again.String() != got.String() || !bytes.Equal(again.ID, got.ID) || again.Token != got.Token {
			t.Errorf("ParseURI(%s).String() = %s does not read back (%+v, %v)", c.in, got.String(), again, err)
		}
	}
}

func TestParseURIRefuses(t *testing.T) {
	const mod = "module-path=/usr/lib/softhsm/libsofthsm2.so"
	for _, c := range []struct{ in, want string }{
		{"/etc/tablectl/checkpoint.key", "does not start with"},
		{"pkcs11:token=t;object=cp", "module-path is required"},
		{"pkcs11:token=t;object=cp?module-path=libsofthsm2.so", "not an absolute path"},
		{"pkcs11:object=cp?" + mod, "name the token"},
		{"pkcs11:token=t?" + mod, "name the key"},
		{"pkcs11:token=t;object=cp?" + mod + "&pin-value=1234", "pin-value is refused"},
		{"pkcs11:token=t;object=cp?" + mod + "&module-name=softhsm2", `"module-name" is not supported`},
		{"pkcs11:token=t;object=cp;slot-id=3?" + mod, `"slot-id" is not supported`},
		{"pkcs11:token=t;token=u;object=cp?" + mod, "given twice"},
		{"pkcs11:token=t;object=cp;type=cert?" + mod, "want private or public"},
		{"pkcs11:token=t;object=c%zz?" + mod, "invalid URL escape"},
		{"pkcs11:token=t;object?" + mod, "want name=value"},
		{"pkcs11:token=t;id=?" + mod, "id is empty"},
		{"pkcs11:token=t;object=cp?" + mod + "&pin-source=hsm.pin", "want file:/absolute/path"},
		{"pkcs11:token=t;object=cp?" + mod + "&pin-source=|/bin/askpin", "want file:/absolute/path"},
	} {
		_, err := ParseURI(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseURI(%s): %v; want an error saying %q", c.in, err, c.want)
		}
	}
}

import t from "tap";
import { cdiDeviceRequests, requireCdi, validateCdiDevices } from "../../../../src/runtime/container/cdi.ts";

t.test("CDI names must be fully qualified", async (t) => {
  t.doesNotThrow(() => validateCdiDevices(["vendor.com/class=name", "nvidia.com/gpu=0", "cridock.test/null=dev:1.a"]));
  for (const bad of ["", "gpu0", "vendor.com/class", "vendor.com=name", "/class=name", "vendor.com/class=", "v/c=n;rm", "v/c=n\n"]) {
    t.throws(() => validateCdiDevices([bad]), { code: "INVALID_ARGUMENT" }, JSON.stringify(bad));
  }
});

t.test("the engine must report CDI spec directories", async (t) => {
  t.doesNotThrow(() => requireCdi({ ServerVersion: "29.0.0", CDISpecDirs: ["/etc/cdi", "/var/run/cdi"] }, "1.48", ["a.b/c=d"]));
  t.throws(() => requireCdi({ ServerVersion: "20.10.24+dfsg1" }, "1.41", ["a.b/c=d"]), {
    code: "FAILED_PRECONDITION",
    message: /a\.b\/c=d.*Docker 25 or newer.*this engine is Docker 20\.10\.24\+dfsg1 with Engine API 1\.41/,
  });
  t.throws(() => requireCdi({ ServerVersion: "29.0.0", CDISpecDirs: [] }, "1.48", ["a.b/c=d"]), { code: "FAILED_PRECONDITION", message: /"cdi"/ });
  t.throws(() => requireCdi({ ServerVersion: "29.0.0", CDISpecDirs: null }, "1.48", ["a.b/c=d"]), { code: "FAILED_PRECONDITION" });
});

t.test("device requests: one cdi request with every name", async (t) => {
  t.same(cdiDeviceRequests(["a.b/c=d", "a.b/c=e"]), [{ Driver: "cdi", DeviceIDs: ["a.b/c=d", "a.b/c=e"] }]);
  t.same(cdiDeviceRequests([]), []);
});

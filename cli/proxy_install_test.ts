import { equal, ok } from "node:assert/strict";
import { bootScript, cronWith, poolUnitText, unitText } from "./proxy_install.ts";

Deno.test("bootScript quotes every argument and value for sh", () => {
  const s = bootScript(["/opt/deno", "run", "it's here", "$HOME"], { HOME: "/home/o'b" });
  ok(s.startsWith("#!/bin/sh\n"));
  ok(s.includes(`export HOME='/home/o'\\''b'`), s);
  ok(s.includes(`exec '/opt/deno' 'run' 'it'\\''s here' '$HOME'`), s);
});

Deno.test("unitText quotes for systemd and picks the target by system or user unit", () => {
  const u = unitText(["/opt/deno", "a b", 'q"$x'], { HOME: "/root" }, false);
  ok(u.includes(`ExecStart="/opt/deno" "a b" "q\\"$$x"`), u);
  ok(u.includes(`Environment="HOME=/root"`), u);
  ok(u.includes("WantedBy=multi-user.target"));
  ok(unitText(["x"], {}, true).includes("WantedBy=default.target"));
  ok(u.includes("Restart=on-failure"));
});

Deno.test("cronWith replaces only its own tagged line and removes it again", () => {
  const mine = "0 * * * * backup\n";
  const one = cronWith(mine, "/s/boot.sh");
  equal(one, "0 * * * * backup\n@reboot '/s/boot.sh' >/dev/null 2>&1 # isx-proxy\n");
  equal(cronWith(one, "/t/boot.sh").match(/isx-proxy/g)?.length, 1);
  equal(cronWith(one, undefined), mine);
  equal(cronWith("", undefined), "");
});

Deno.test("bootScript starts the warm-pool keeper in the background before the proxy", () => {
  const s = bootScript(["/opt/isx", "proxy", "start"], {}, {
    argv: ["/opt/isx", "pool", "keep"],
    log: "/st/pool/keeper.log",
  });
  const lines = s.split("\n");
  const keep = lines.findIndex((l) => l.startsWith("nohup '/opt/isx' 'pool' 'keep'"));
  const start = lines.findIndex((l) => l.startsWith("exec '/opt/isx' 'proxy' 'start'"));
  ok(keep > 0 && start > keep, s);
  ok(lines[keep]!.endsWith(">>'/st/pool/keeper.log' 2>&1 </dev/null &"), s);
  ok(lines.includes("mkdir -p '/st/pool'"), s);
  ok(!bootScript(["x"], {}).includes("nohup"));
  const u = poolUnitText(["/opt/isx", "pool", "keep"], {}, true);
  ok(u.includes("After=network-online.target incus.service isx-proxy.service"), u);
  ok(u.includes('ExecStart="/opt/isx" "pool" "keep"'), u);
});

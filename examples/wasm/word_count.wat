;; word_count: a WASI preview 1 command. Reads the call's arguments, {"text":"..."},
;; on stdin and writes {"words":N} on stdout. Built by `npm run build -w @forge-fleet/examples`
;; (wabt's wat2wasm) into examples/dist/wasm/word_count.wasm.
;; Memory: 0-15 iovec, 16-23 counters, 64-127 digits, 256 constants, 1024.. input.
(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  ;; 2 pages to start, 16 pages (1 MiB) at most: inputs beyond ~1 MiB fail with exit code 2.
  (memory (export "memory") 2 16)
  (data (i32.const 256) "{\"words\":")
  (data (i32.const 272) "{\"text\":\"")
  (data (i32.const 320) "word_count: expected {\"text\":\"...\"} on stdin\n")

  (func $write (param $fd i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0) (local.get $ptr))
    (i32.store (i32.const 4) (local.get $len))
    (drop (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 16))))

  (func $is_space (param $c i32) (result i32)
    (i32.or (i32.or (i32.eq (local.get $c) (i32.const 32)) (i32.eq (local.get $c) (i32.const 9)))
            (i32.or (i32.eq (local.get $c) (i32.const 10)) (i32.eq (local.get $c) (i32.const 13)))))

  (func (export "_start")
    (local $len i32) (local $cap i32) (local $i i32) (local $c i32) (local $space i32)
    (local $inword i32) (local $words i32) (local $p i32)
    ;; Read stdin to EOF, growing memory page by page.
    (block $eof
      (loop $read
        (local.set $cap (i32.sub (i32.mul (memory.size) (i32.const 65536)) (i32.const 1024)))
        (if (i32.eq (local.get $len) (local.get $cap))
          (then
            (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then (call $proc_exit (i32.const 2))))
            (br $read)))
        (i32.store (i32.const 0) (i32.add (i32.const 1024) (local.get $len)))
        (i32.store (i32.const 4) (i32.sub (local.get $cap) (local.get $len)))
        (if (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 16)) (then (call $proc_exit (i32.const 1))))
        (br_if $eof (i32.eqz (i32.load (i32.const 16))))
        (local.set $len (i32.add (local.get $len) (i32.load (i32.const 16))))
        (br $read)))
    ;; The input must start with {"text":" (the arguments schema allows nothing else).
    (local.set $i (i32.const 0))
    (block $bad
      (block $ok
        (br_if $bad (i32.lt_u (local.get $len) (i32.const 9)))
        (loop $prefix
          (br_if $ok (i32.eq (local.get $i) (i32.const 9)))
          (br_if $bad (i32.ne (i32.load8_u (i32.add (i32.const 1024) (local.get $i)))
                              (i32.load8_u (i32.add (i32.const 272) (local.get $i)))))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $prefix)))
      ;; Count words up to the closing quote; \n \t \r escapes are spaces.
      (block $end
        (loop $scan
          (br_if $end (i32.ge_u (local.get $i) (local.get $len)))
          (local.set $c (i32.load8_u (i32.add (i32.const 1024) (local.get $i))))
          (br_if $end (i32.eq (local.get $c) (i32.const 34)))
          (if (i32.eq (local.get $c) (i32.const 92))
            (then
              (local.set $i (i32.add (local.get $i) (i32.const 1)))
              (local.set $c (i32.load8_u (i32.add (i32.const 1024) (local.get $i))))
              (local.set $space (i32.or (i32.or (i32.eq (local.get $c) (i32.const 110)) (i32.eq (local.get $c) (i32.const 116)))
                                        (i32.eq (local.get $c) (i32.const 114)))))
            (else (local.set $space (call $is_space (local.get $c)))))
          (if (i32.and (i32.eqz (local.get $space)) (i32.eqz (local.get $inword)))
            (then (local.set $words (i32.add (local.get $words) (i32.const 1)))))
          (local.set $inword (i32.eqz (local.get $space)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $scan)))
      ;; {"words":N}\n — digits written backwards ending at 126.
      (local.set $p (i32.const 126))
      (i32.store8 (i32.const 126) (i32.const 125))
      (i32.store8 (i32.const 127) (i32.const 10))
      (loop $digits
        (local.set $p (i32.sub (local.get $p) (i32.const 1)))
        (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.rem_u (local.get $words) (i32.const 10))))
        (local.set $words (i32.div_u (local.get $words) (i32.const 10)))
        (br_if $digits (local.get $words)))
      (call $write (i32.const 1) (i32.const 256) (i32.const 9))
      (call $write (i32.const 1) (local.get $p) (i32.sub (i32.const 128) (local.get $p)))
      (return))
    (call $write (i32.const 2) (i32.const 320) (i32.const 45))
    (call $proc_exit (i32.const 1))))

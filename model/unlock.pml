/*
 * SessionVault's unlock machine, as designed in docs/key-hierarchy.md.
 * Checked by scripts/model-check with spin; docs/reliability.md ("The unlock
 * machine, model-checked") says which code each transition is.
 *
 * What is modelled, abstractly (one bit or a small number each):
 *   disk:   the one slot that wraps VK (`device` xor `pin`), the fingerprint
 *           record (an enrollment digest, no key), the `stale:fingerprint`
 *           mark, the PIN failure count and lockout (one row, one transaction).
 *           The `login:` identity row always exists (the model starts after the
 *           first login) and holds no key.
 *   world:  the reader's current enrollment digest (changes on its own).
 *   vaultd: VK in memory, the soft box (VK under BLAKE2b(E, digest)), the
 *           record key RK of a session stored by a login while locked, the
 *           failed-scan count, "a login met reenroll_min_acr this run".
 *   person: holds a working session or not.
 * Old sessions always exist and are sealed under VK.
 *
 * Processes: the Owner (knows the PIN, has a valid BankID/Vipps login), the
 * Env (anything else the person, their processes or time do; the harmful
 * moves have budgets so that liveness can be asked), Crash (kill -9 and a
 * restart at any point), and an OfflineAttacker who copies the disk once, at
 * any point, and holds DK.
 *
 * Mutants (each must make one property fail; scripts/model-check runs them):
 *   BUG_RELEASE_WITH_RK         the release gate counts a login's record key as "unlocked"
 *   BUG_SOFTBOX_SURVIVES_CHANGE the soft box is sealed under E alone, not E + digest
 *   BUG_COUNT_AFTER_CHECK       the PIN is checked, then a failure is counted
 *   BUG_LOCKOUT_AFTER_CHECK     the count is written before the check, the lockout after it
 *   BUG_LOGIN_SLOT_WRAPS_VK     the login row wraps VK under DK + stored identity (the old design)
 *   BUG_FP_SLOT_WRAPS_VK        the fingerprint row wraps VK under DK + the digest (the old design)
 *   BUG_ENROLL_TWO_TXNS         enrolling a PIN writes `pin`, then deletes `device`, in two transactions
 *   BUG_DELETE_LAST_SLOT        disabling the PIN counts the fingerprint as a remaining
 *                               way in and does not put `device` back
 *   BUG_FP_COUNT_PER_ATTEMPT    an unlock that ends in Cancel or a timeout starts the
 *                               failed-scan count again (each attempt gets fresh tries)
 */

#define FREE      2   /* wrong PINs before a lockout (the real throttle has more; the shape is the same) */
#define FP_TRIES  3   /* failed scans before the fingerprint fallback */
#define MAXDIG    1   /* enrollment digests 0..1: one enrollment change */
#ifndef CRASHES
#define CRASHES   2
#endif
#ifndef WRONG_PINS
#define WRONG_PINS 3
#endif
#ifndef LOCKS
#define LOCKS     1
#endif

#ifdef BUG_RELEASE_WITH_RK
#define RELEASE_GATE (vk_mem || rk_mem)
#else
#define RELEASE_GATE vk_mem
#endif
#ifdef BUG_SOFTBOX_SURVIVES_CHANGE
#define SOFTBOX_OPENS softbox
#else
#define SOFTBOX_OPENS (softbox && sb_dig == reader)
#endif
#ifdef BUG_LOGIN_SLOT_WRAPS_VK
#define LOGIN_ROW_OPENS_VK 1
#else
#define LOGIN_ROW_OPENS_VK 0
#endif
#ifdef BUG_FP_SLOT_WRAPS_VK
#define FP_ROW_OPENS_VK 1
#else
#define FP_ROW_OPENS_VK 0
#endif

/* disk */
bit  dev_slot, pin_slot;        /* the one slot that wraps VK */
bit  fp_rec;  byte fp_dig;      /* fingerprint record: the enrollment digest (MAC good) */
bit  stale;                     /* meta stale:fingerprint */
byte count;   bit lockout;      /* PIN failure count and locked_until > now */
/* world */
byte reader;                    /* the reader's enrollment digest now */
/* vaultd memory */
bit  vk_mem, rk_mem, softbox, strong_run;
bit  busy;                      /* an unlock is running (single-flight: ensureUnlocked) */
byte sb_dig, fp_fails;          /* fp_fails: failed scans against this soft box (SoftUnlock.failedScans) */
byte epoch;                     /* bumps on every restart: work in flight is lost */
/* the person */
bit  working;
/* budgets */
byte crashes_left = CRASHES, wrong_left = WRONG_PINS, locks_left = LOCKS;
/* ghosts: what the properties look at */
byte credits;                   /* durable counter increments not yet used by a check */
bit  owed;                      /* the count reached the limit: a lockout is owed until one ends */
bit  bad_release, bad_fp_open, bad_uncounted, bad_lockout, attacker_won, bad_fp_guess;
byte box_misses;                /* misses since this soft box was made or last matched, however counted */

ltl locked_releases_nothing       { [] !bad_release }
ltl stale_fingerprint_never_opens { [] !bad_fp_open }
ltl pin_counted_before_check      { [] !bad_uncounted }
ltl pin_lockout_holds             { [] !bad_lockout }
ltl dk_and_disk_open_nothing      { [] !attacker_won }
ltl fp_tries_bounded              { [] !bad_fp_guess }
ltl no_dead_end                   { [] <> working }
ltl old_sessions_reachable        { [] <> vk_mem }

/* Witnesses (built with -DWITNESS): steps the model as designed must reach,
 * or the properties above could hold only because what matters never happens.
 * Each claim below must be violated. */
#ifdef WITNESS
byte seen;
#define W(bit) seen = seen | (1 << bit)
ltl w_pin_opens          { [] !(seen & 1) }
ltl w_lockout_served     { [] !(seen & 2) }
ltl w_pending_session    { [] !(seen & 4) }
ltl w_login_opens_device { [] !(seen & 8) }
ltl w_softbox_opens      { [] !(seen & 16) }
ltl w_enrollment_change  { [] !(seen & 32) }
ltl w_fallback           { [] !(seen & 64) }
ltl w_killed_in_attempt  { [] !(seen & 128) }
#else
#define W(bit) skip
#endif

/* A new soft box starts with no failed scans: the count lives with the box
 * (SoftUnlock.failedScans), so what makes a box (the PIN, a login that reaches
 * VK, setting the fingerprint up, a start without a PIN) is what resets it. */
inline new_softbox(d) { softbox = 1; sb_dig = d; fp_fails = 0; box_misses = 0 }

/* A hard unlock (PIN, a login without a PIN, the device slot at start) puts VK
 * in memory and, with a fingerprint set up, (re)fills the soft box. */
inline fill_softbox() {
  if
  :: fp_rec -> new_softbox(fp_dig)
  :: else -> skip
  fi
}
inline hard_open() { vk_mem = 1; fill_softbox() }
inline wipe_softbox() { softbox = 0; sb_dig = 0; fp_fails = 0 }

/* vaultd starts: memory is empty. Without a PIN the device slot is opened at
 * once; with a fingerprint its VK goes into the soft box and the vault stays locked. */
inline restart() {
  vk_mem = 0; rk_mem = 0; strong_run = 0; fp_fails = 0; working = 0; busy = 0;
  wipe_softbox();
  if
  :: dev_slot && fp_rec -> new_softbox(fp_dig)
  :: dev_slot && !fp_rec -> vk_mem = 1
  :: else -> skip
  fi
}

/* The one transaction before Argon2id: count + 1 and the lockout this failure would bring. */
inline count_attempt() {
  if :: count < 3 -> count++ :: else -> skip fi;
#ifndef BUG_LOCKOUT_AFTER_CHECK
  lockout = (count >= FREE);
#endif
  owed = (count >= FREE);
  credits++
}

/* The Argon2id check itself: what the properties watch. */
inline check_pin() {
  if :: credits == 0 -> bad_uncounted = 1 :: else -> credits-- fi
}

/* One PIN attempt (runPolicy → attempt, lowEntropySecret). Each atomic block
 * is one step; a crash can land between any two. */
inline pin_attempt(right, budget_ok) {
  atomic {
    budget_ok && pin_slot && !vk_mem && !lockout && !busy ->
    busy = 1;
    /* admitted: no lockout in force. One that is owed and not served is the bug. */
    if :: owed -> bad_lockout = 1 :: else -> skip fi;
    if :: !right -> wrong_left-- :: else -> skip fi;
    e = epoch;
#ifndef BUG_COUNT_AFTER_CHECK
    count_attempt()
#else
    skip
#endif
  }
  atomic {
    if
    :: e == epoch -> check_pin(); ok = right
    :: else -> ok = 0; e = 255; W(7)      /* vaultd died: nothing was checked */
    fi
  }
  atomic {
    if
    :: e == epoch && ok ->                 /* right: reset count and lockout, open */
       count = 0; lockout = 0; owed = 0;
       hard_open(); rk_mem = 0; W(0)
    :: e == epoch && !ok ->
#ifdef BUG_COUNT_AFTER_CHECK
       count_attempt();
#endif
#ifdef BUG_LOCKOUT_AFTER_CHECK
       lockout = (count >= FREE);
#endif
       skip
    :: else -> skip
    fi;
    if :: e == epoch -> busy = 0 :: else -> skip fi;
    e = 0; ok = 0
  }
}

/* A verified BankID/Vipps login reaches adopt (the provider's flow before it
 * stores nothing, so a crash during it is a login that never happened). */
inline owner_login() {
  if :: strong_run = 1 :: skip fi;        /* the login met reenroll_min_acr, or not */
  if
  :: vk_mem ->                            /* stored under VK, released */
     fill_softbox(); working = 1
  :: !vk_mem && LOGIN_ROW_OPENS_VK ->     /* (mutant) the login row opens VK */
     hard_open(); working = 1
  :: !vk_mem && !LOGIN_ROW_OPENS_VK && pin_slot ->
     rk_mem = 1; working = 1; W(2)        /* new session under RK, released; old ones wait for the PIN */
  :: !vk_mem && !LOGIN_ROW_OPENS_VK && !pin_slot && dev_slot ->
     hard_open(); working = 1; W(3)       /* no PIN: the same person opens VK through `device` */
  :: !vk_mem && !LOGIN_ROW_OPENS_VK && !pin_slot && !dev_slot ->
     skip                                 /* nothing opens VK and no new VK is made silently: refused */
  fi
}

/* A client asks for an old session. */
inline release_old() {
  if
  :: RELEASE_GATE ->
     if :: !vk_mem -> bad_release = 1 :: else -> skip fi;
     working = 1
  :: else -> skip                         /* locked: "Waits for your PIN" */
  fi
}

/* A fingerprint scan while locked. The fingerprint is asked only while its
 * soft box lives (UnlockPolicy.usableFactors), so the Env offers a scan only then. */
inline scan() {
  if :: softbox && box_misses >= FP_TRIES -> bad_fp_guess = 1 :: else -> skip fi;
  if
  :: true ->                              /* the enrolled finger */
     if
     :: SOFTBOX_OPENS ->
        if :: !(fp_rec && fp_dig == reader) -> bad_fp_open = 1 :: else -> skip fi;
        vk_mem = 1; fp_fails = 0; box_misses = 0; W(4)   /* a match forgives the misses before it */
     :: !(SOFTBOX_OPENS) && fp_dig != reader ->
        /* the record's MAC is good and its digest differs: an enrollment change.
         * Clear the record, wipe the soft box, go to BankID/Vipps. */
        fp_rec = 0; fp_dig = 0; stale = 1; fp_fails = 0; wipe_softbox(); W(5)
     :: !(SOFTBOX_OPENS) && fp_dig == reader && FP_ROW_OPENS_VK ->
        hard_open()                       /* (mutant) the record opens VK at rest */
     :: !(SOFTBOX_OPENS) && fp_dig == reader && !FP_ROW_OPENS_VK ->
        skip                              /* no soft box: the PIN or a login is needed once */
     fi
  :: true ->                              /* another finger: counted across attempts */
     fp_fails++;
     if :: box_misses < FP_TRIES -> box_misses++ :: else -> skip fi;
     if
     :: fp_fails >= FP_TRIES -> wipe_softbox(); W(6)   /* the fallback */
     :: else -> skip
     fi
  fi
}

/* An unlock that ends without a match: Cancel (in the dialog or at the reader),
 * a scan timeout, a button to another way in. The misses so far stay counted. */
inline scan_ends() {
#ifdef BUG_FP_COUNT_PER_ATTEMPT
  fp_fails = 0
#else
  skip
#endif
}

proctype Owner() {
  byte e; bit ok;
end:
  do
  :: atomic { !working -> owner_login() }
  :: pin_attempt(1, 1)
  :: atomic { lockout -> lockout = 0; owed = 0; W(1) }   /* waits the lockout out */
  :: atomic { vk_mem && !working -> release_old() }
  od
}

proctype Env() {
  byte e; bit ok;
end:
  do
  :: pin_attempt(0, wrong_left > 0)    /* someone guesses a wrong PIN */
  :: atomic { fp_rec && !vk_mem && softbox -> scan() }            /* a scan */
  :: atomic { fp_rec && !vk_mem && softbox -> scan_ends() }       /* Cancel or a timeout */
  :: atomic { reader < MAXDIG -> reader++ }            /* the enrollment changes */
  :: atomic { softbox -> wipe_softbox() }              /* fingerprint_max_hours */
  :: atomic { lockout -> lockout = 0; owed = 0 }     /* time passes */
  :: atomic { locks_left > 0 && (pin_slot || fp_rec) && (vk_mem || rk_mem) ->
              locks_left--; vk_mem = 0; rk_mem = 0; working = 0 }   /* idle, max_unlocked, vaultctl lock */
  :: atomic { release_old() }
  /* Another person's login (an identity other than the login row's) is
   * refused and changes nothing, so it is no transition here. */
  :: atomic { vk_mem && !fp_rec && (!stale || strong_run) ->        /* set up the fingerprint */
              fp_rec = 1; fp_dig = reader; stale = 0; new_softbox(reader) }
  :: atomic { vk_mem && fp_rec -> fp_rec = 0; fp_dig = 0; wipe_softbox() }    /* disable it */
#ifndef BUG_ENROLL_TWO_TXNS
  :: atomic { vk_mem && !pin_slot ->                   /* enroll a PIN: one transaction */
              pin_slot = 1; dev_slot = 0; count = 0; lockout = 0; owed = 0 }
#else
  :: atomic { vk_mem && !pin_slot -> e = epoch; pin_slot = 1; count = 0; lockout = 0; owed = 0 };
     atomic { if :: e == epoch -> dev_slot = 0 :: else -> skip fi }
#endif
  :: atomic { vk_mem && pin_slot ->                    /* disable the PIN: `device` back, one transaction */
              pin_slot = 0; count = 0; lockout = 0; owed = 0;
#ifdef BUG_DELETE_LAST_SLOT
              if :: !fp_rec -> dev_slot = 1 :: else -> skip fi
#else
              dev_slot = 1
#endif
            }
  od
}

proctype Crash() {
end:
  do
  :: atomic { crashes_left > 0 -> crashes_left--; epoch++; restart() }
  od
}

/* DK and a copy of the disk, taken at any one moment: try every row with
 * everything stored (empty secret, stored identity, stored digest, salt). */
proctype OfflineAttacker() {
  atomic {
    if
    :: pin_slot && dev_slot -> attacker_won = 1              /* `device` opens with DK alone */
    :: pin_slot && !dev_slot && LOGIN_ROW_OPENS_VK -> attacker_won = 1   /* stored identity */
    :: pin_slot && !dev_slot && fp_rec && FP_ROW_OPENS_VK -> attacker_won = 1   /* stored digest */
    :: else -> skip   /* `pin` needs the PIN; fingerprint and login rows hold no key;
                         a waiting session's RK is sealed to VK's public key */
    fi
  }
}

init {
  atomic {
    if                                   /* any starting configuration */
    :: pin_slot = 1; dev_slot = 0
    :: pin_slot = 0; dev_slot = 1
    fi;
    if
    :: fp_rec = 1
    :: fp_rec = 0
    fi;
    restart();
    run Owner(); run Env(); run Crash(); run OfflineAttacker()
  }
}

//! Hybrid retrieval end to end, on the real model and index: keyword (BM25) search that finds
//! exact terms, inflections, Chinese and Japanese; session boost versus session filter;
//! `as_of` (what was true then); `always` procedures at task start; a token-budgeted
//! `context`; per-stage timings; bad parameters refused with the field named. Last, the
//! LoCoMo recall benchmark on one conversation, which must print its table.

use engram_tests::embedding_stand_in::EmbeddingStandIn;
use engram_tests::llm_stand_in::{LlmStandIn, ScriptedReply};
use engram_tests::{ApiClient, TestServer, run_bench, workspace_root};
use serde_json::{Value, json};

fn contents(response_body: &Value) -> Vec<String> {
    response_body["results"]
        .as_array()
        .map(|results| {
            results
                .iter()
                .filter_map(|result| result["memory"]["content"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

async fn search_ok(client: &ApiClient, body: Value) -> Value {
    let response = client.search(body.clone()).await;
    assert_eq!(
        response.status, 200,
        "search {body} failed: {}",
        response.body
    );
    response.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyword_search_finds_exact_terms_inflections_chinese_and_japanese() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let added = client
        .add(json!([
            {"content": "The staging database password rotates every month under ticket OPS-4471", "user_id": "dana"},
            {"content": "Production database credentials live in the team vault", "user_id": "dana"},
            {"content": "The analytics database is backed up nightly", "user_id": "dana"},
            {"content": "Dana's laptop password manager is 1Password", "user_id": "dana"},
            {"content": "我最喜欢吃北京烤鸭", "user_id": "dana"},
            {"content": "私は東京都に住んでいます", "user_id": "dana"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);

    // An identifier the embedding model has no meaning for: keyword and hybrid put it first.
    for (retrieval, fusion) in [
        ("keyword", "weighted"),
        ("hybrid", "weighted"),
        ("hybrid", "rrf"),
    ] {
        let body = search_ok(
            &client,
            json!({"query": "OPS-4471", "user_id": "dana", "retrieval": retrieval, "fusion": fusion}),
        )
        .await;
        let found = contents(&body);
        assert!(
            found
                .first()
                .is_some_and(|first| first.contains("OPS-4471")),
            "{retrieval} {fusion}: {found:?}"
        );
        for result in body["results"].as_array().unwrap() {
            let score = result["score"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&score), "{body}");
        }
    }
    // Keyword search returns only memories holding a query term; other inflections count.
    let found = contents(
        &search_ok(
            &client,
            json!({"query": "rotating passwords", "user_id": "dana", "retrieval": "keyword"}),
        )
        .await,
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("rotates"), "{found:?}");
    // Chinese and Japanese words inside unsegmented sentences.
    for (query, expected) in [("北京", "北京烤鸭"), ("東京に住む", "東京都")] {
        let found = contents(
            &search_ok(
                &client,
                json!({"query": query, "user_id": "dana", "retrieval": "keyword"}),
            )
            .await,
        );
        assert_eq!(found.len(), 1, "{query}: {found:?}");
        assert!(found[0].contains(expected), "{query}: {found:?}");
    }
    // Dense retrieval ranks everything by meaning, so with no floor (`min_score` 0) it
    // returns unrelated memories too.
    let dense = contents(
        &search_ok(
            &client,
            json!({"query": "北京", "user_id": "dana", "retrieval": "dense", "min_score": 0}),
        )
        .await,
    );
    assert_eq!(dense.len(), 6, "{dense:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_id_boosts_its_memories_and_filters_only_when_asked() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let same = "Booked a hotel room near the conference venue";
    let added = client
        .add(json!([
            {"content": same, "user_id": "ana", "session_id": "trip-porto"},
            {"content": same, "user_id": "ana", "session_id": "trip-lyon"},
            {"content": "Ordered a vegetarian meal for the flight", "user_id": "ana", "session_id": "trip-porto"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);

    for session in ["trip-porto", "trip-lyon"] {
        let body = search_ok(
            &client,
            json!({"query": "hotel booking", "user_id": "ana", "session_id": session,
                   "diversify": false, "explain": true}),
        )
        .await;
        let results = body["results"].as_array().unwrap();
        assert_eq!(results.len(), 3, "boosting filters nothing: {body}");
        assert_eq!(results[0]["memory"]["session_id"], session, "{body}");
        assert!(results[0]["signals"]["session_bonus"].as_f64().unwrap() > 0.0);
        assert_eq!(results[1]["memory"]["content"], same);
        assert_eq!(results[1]["signals"]["session_bonus"].as_f64(), Some(0.0));
    }
    // Diversity: the identical memory is returned once, the boosted session's copy.
    let body = search_ok(
        &client,
        json!({"query": "hotel booking", "user_id": "ana", "session_id": "trip-lyon"}),
    )
    .await;
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{body}");
    assert_eq!(results[0]["memory"]["session_id"], "trip-lyon");
    // Filtering by the session is explicit.
    let body = search_ok(
        &client,
        json!({"query": "hotel booking", "user_id": "ana", "session_id": "trip-porto",
               "session_only": true}),
    )
    .await;
    for result in body["results"].as_array().unwrap() {
        assert_eq!(result["memory"]["session_id"], "trip-porto", "{body}");
    }
    assert_eq!(body["results"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_of_answers_what_was_true_at_that_time() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let before_anything = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let lisbon = client
        .add_one(json!({"content": "Mia lives in Lisbon", "user_id": "mia", "key": "home-city"}))
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let while_in_lisbon = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let berlin = client
        .add_one(json!({"content": "Mia lives in Berlin", "user_id": "mia", "key": "home-city"}))
        .await;

    let now = contents(
        &search_ok(
            &client,
            json!({"query": "where does Mia live", "user_id": "mia"}),
        )
        .await,
    );
    assert_eq!(now, vec![berlin["content"].as_str().unwrap().to_string()]);
    for retrieval in ["hybrid", "dense", "keyword"] {
        let then = contents(
            &search_ok(
                &client,
                json!({"query": "where does Mia live", "user_id": "mia",
                       "as_of": while_in_lisbon, "retrieval": retrieval}),
            )
            .await,
        );
        assert_eq!(
            then,
            vec![lisbon["content"].as_str().unwrap().to_string()],
            "{retrieval}"
        );
    }
    let nothing_yet = search_ok(
        &client,
        json!({"query": "where does Mia live", "user_id": "mia", "as_of": before_anything}),
    )
    .await;
    assert_eq!(nothing_yet["results"], json!([]));
    // Another end-user's past is not this one's.
    let other = search_ok(
        &client,
        json!({"query": "where does Mia live", "user_id": "someone-else", "as_of": while_in_lisbon}),
    )
    .await;
    assert_eq!(other["results"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_procedures_come_first_in_a_context_that_fits_the_budget() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let added = client
        .add(json!([
            {"content": "Always answer in British English", "kind": "procedural",
             "agent_id": "planner", "metadata": {"always": true}},
            {"content": "Never book flights before 7 am for Ana", "kind": "procedural",
             "agent_id": "planner", "user_id": "ana", "metadata": {"always": true}},
            {"content": "Bruno wants receipts as PDF", "kind": "procedural",
             "agent_id": "planner", "user_id": "bruno", "metadata": {"always": true}},
            {"content": "Summaries go to the writer's inbox", "kind": "procedural",
             "agent_id": "writer", "metadata": {"always": true}},
            {"content": "Use the travel policy of 2024", "kind": "procedural", "agent_id": "planner"},
            {"content": "Ana prefers aisle seats", "user_id": "ana", "agent_id": "planner"},
            {"content": "Ana flies to Oslo in March", "user_id": "ana", "agent_id": "planner"},
            {"content": "Ana is vegetarian", "user_id": "ana", "agent_id": "planner"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);

    let body = search_ok(
        &client,
        json!({"query": "plan Ana's trip to Oslo", "user_id": "ana", "agent_id": "planner",
               "include_always": true, "context_tokens": 400}),
    )
    .await;
    let always: Vec<&str> = body["always"]
        .as_array()
        .unwrap()
        .iter()
        .map(|memory| memory["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        always,
        vec![
            "Always answer in British English",
            "Never book flights before 7 am for Ana"
        ],
        "the agent's own and this user's, not Bruno's nor the writer's: {body}"
    );
    let results = contents(&body);
    assert!(
        !results
            .iter()
            .any(|content| content.starts_with("Always answer")),
        "{results:?}"
    );
    let context = &body["context"];
    let text = context["text"].as_str().unwrap();
    assert!(
        text.starts_with("Memories (most relevant first):"),
        "{text}"
    );
    let lines: Vec<&str> = text.lines().skip(1).collect();
    assert!(
        lines[0].contains("Always answer in British English")
            && lines[0].contains("procedural, always"),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.contains("Ana flies to Oslo in March")),
        "{text}"
    );
    let first_id = body["always"][0]["id"].as_str().unwrap();
    assert!(
        lines[0].contains(first_id),
        "provenance names the memory: {text}"
    );
    assert_eq!(context["omitted"], 0);
    assert!(context["tokens"].as_u64().unwrap() <= 400);
    assert_eq!(context["memory_ids"].as_array().unwrap().len(), lines.len());

    // A small budget keeps the best lines and says how many were left out.
    let tight = search_ok(
        &client,
        json!({"query": "plan Ana's trip to Oslo", "user_id": "ana", "agent_id": "planner",
               "include_always": true, "context_tokens": 80}),
    )
    .await;
    let tight_context = &tight["context"];
    assert!(
        tight_context["tokens"].as_u64().unwrap() <= 80,
        "{tight_context}"
    );
    assert!(
        tight_context["omitted"].as_u64().unwrap() > 0,
        "{tight_context}"
    );
    assert!(
        tight_context["text"]
            .as_str()
            .unwrap()
            .contains("British English"),
        "the always procedure comes first: {tight_context}"
    );
    // Without the flag, neither `always` nor `context` appear.
    let plain = search_ok(
        &client,
        json!({"query": "plan Ana's trip", "user_id": "ana"}),
    )
    .await;
    assert!(
        plain.get("always").is_none() && plain.get("context").is_none(),
        "{plain}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_reports_ranking_signals_and_per_stage_latency() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    client
        .add_one(json!({"content": "The invoice for March was paid late"}))
        .await;
    client
        .add_one(json!({"content": "Quarterly taxes are due in April"}))
        .await;

    let body = search_ok(
        &client,
        json!({"query": "late invoice payment", "explain": true, "min_score": 0.3}),
    )
    .await;
    let timings = &body["timings_ms"];
    for stage in ["embed", "dense", "keyword", "hydrate", "rank", "total"] {
        assert!(
            timings[stage].as_f64().is_some_and(|ms| ms >= 0.0),
            "{stage}: {body}"
        );
    }
    assert!(timings["total"].as_f64().unwrap() >= timings["dense"].as_f64().unwrap());
    let first = &body["results"][0];
    assert_eq!(
        first["memory"]["content"],
        "The invoice for March was paid late"
    );
    assert!(first["signals"]["dense_similarity"].as_f64().unwrap() > 0.3);
    assert!(first["signals"]["keyword_score"].as_f64().unwrap() > 0.0);
    for result in body["results"].as_array().unwrap() {
        assert!(
            result["score"].as_f64().unwrap() >= 0.3,
            "min_score holds: {body}"
        );
    }

    // Keyword mode embeds nothing.
    let keyword = search_ok(
        &client,
        json!({"query": "invoice", "explain": true, "retrieval": "keyword"}),
    )
    .await;
    assert_eq!(keyword["timings_ms"]["dense"], 0.0, "{keyword}");
    assert!(keyword["results"][0]["signals"]["dense_similarity"].is_null());
    // Without `explain`, neither signals nor timings.
    let plain = search_ok(&client, json!({"query": "invoice"})).await;
    assert!(plain.get("timings_ms").is_none() && plain["results"][0].get("signals").is_none());
}

/// A hybrid search compares its candidates on both signals: the nearest memory holds the
/// query's word but ranks below the keyword list's depth (sixty shorter memories say it more
/// strongly), and it still gets its keyword score.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dense_candidate_below_the_keyword_lists_depth_still_gets_its_keyword_score() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let switched = settings_patch(
        &client,
        json!({"embedding": {"source": "client", "dimension": 4}}),
    )
    .await;
    assert_eq!(switched.status, 200, "{}", switched.body);
    // Far from the query's vector, and each holding "apple" in a short text.
    let decoys: Vec<Value> = (0..60)
        .map(|number| {
            let angle = number as f64 * 0.05;
            json!({
                "content": format!("apple note number {number}"),
                "embedding": [0.0, angle.cos(), angle.sin(), 0.0],
            })
        })
        .collect();
    let added = client.add(json!(decoys)).await;
    assert_eq!(added.status, 201, "{}", added.body);
    let nearest = "On the long walk home through the old town we talked about an apple tree, \
                   the weather, the harbour and the neighbours";
    client
        .add_one(json!({"content": nearest, "embedding": [1.0, 0.0, 0.0, 0.0]}))
        .await;

    // The keyword list alone (its depth for top_k 1 is 50) leaves the nearest memory out.
    let keyword = search_ok(
        &client,
        // (The decoys' vectors are near one another: no diversification to thin them out.)
        json!({"query": "apple", "retrieval": "keyword", "top_k": 50, "diversify": false}),
    )
    .await;
    assert_eq!(contents(&keyword).len(), 50, "{keyword}");
    assert!(!contents(&keyword).contains(&nearest.to_string()));

    let hybrid = search_ok(
        &client,
        json!({"query": "apple", "query_vector": [1.0, 0.0, 0.0, 0.0], "top_k": 1, "explain": true}),
    )
    .await;
    let first = &hybrid["results"][0];
    assert_eq!(first["memory"]["content"], nearest, "{hybrid}");
    assert!(
        first["signals"]["keyword_score"]
            .as_f64()
            .is_some_and(|score| score > 0.0),
        "the nearest memory is scored on the keyword signal too: {hybrid}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_retrieval_parameters_are_refused_with_the_field_named() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let future = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339();
    for (body, field) in [
        (json!({"query": "x", "retrieval": "bm25"}), "retrieval"),
        (json!({"query": "x", "fusion": "max"}), "fusion"),
        (
            json!({"query": "x", "keyword_weight": 1.5}),
            "keyword_weight",
        ),
        (
            json!({"query": "x", "recency_weight": -0.1}),
            "recency_weight",
        ),
        (
            json!({"query": "x", "neighbour_weight": 1.5}),
            "neighbour_weight",
        ),
        (json!({"query": "x", "context_tokens": 0}), "context_tokens"),
        (
            json!({"query": "x", "context_tokens": 100000}),
            "context_tokens",
        ),
        (json!({"query": "x", "session_only": true}), "session_only"),
        (json!({"query": "x", "as_of": future}), "as_of"),
    ] {
        let response = client.search(body.clone()).await;
        response.assert_problem(422, "validation-failed");
        assert!(
            response.error_fields().contains(&field.to_string()),
            "{body}: {}",
            response.body
        );
    }
}

async fn settings_patch(client: &ApiClient, body: Value) -> engram_tests::ApiResponse {
    client
        .send(
            client
                .request(reqwest::Method::PATCH, "/v1/project/settings")
                .json(&body),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_about_nothing_known_abstains_unless_a_cut_off_is_asked_for() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    for content in [
        "The user lives in Shanghai and drinks oolong tea every morning.",
        "The user prefers green tea to coffee.",
    ] {
        client
            .add_one(json!({"content": content, "user_id": "tea-lover"}))
            .await;
    }
    // A new project gets the floors measured for its model: one for every query, and a
    // higher one for a query naming someone no memory within reach mentions.
    let settings = client
        .send(client.request(reqwest::Method::GET, "/v1/project/settings"))
        .await;
    assert_eq!(
        settings.body["relevance_floor_setting"], "model",
        "{}",
        settings.body
    );
    let close = |value: &Value, expected: f64| {
        value
            .as_f64()
            .is_some_and(|value| (value - expected).abs() < 1e-6)
    };
    assert!(
        close(&settings.body["relevance_floor"], 0.15),
        "{}",
        settings.body
    );
    assert!(
        close(
            &settings.body["relevance_floor_for_unmentioned_names"],
            0.45
        ),
        "{}",
        settings.body
    );
    let unrelated = json!({"query": "unicorn dragons", "user_id": "tea-lover"});
    let nothing_known = search_ok(&client, unrelated.clone()).await;
    assert_eq!(
        contents(&nothing_known),
        Vec::<String>::new(),
        "{nothing_known}"
    );
    assert_eq!(nothing_known["abstained"], true, "{nothing_known}");
    assert!(
        close(&nothing_known["relevance_floor"], 0.15),
        "{nothing_known}"
    );
    // A plain question about a short fact is still answered.
    let drink = search_ok(
        &client,
        json!({"query": "What does the user like to drink?", "user_id": "tea-lover"}),
    )
    .await;
    assert_eq!(drink["abstained"], false, "{drink}");
    assert!(contents(&drink)[0].contains("tea"), "{drink}");
    // Asked about someone these memories never mention, it answers nothing, and says why.
    let about_caroline = json!({
        "query": "What does Caroline like to drink?",
        "user_id": "tea-lover",
        "explain": true,
    });
    let stranger = search_ok(&client, about_caroline.clone()).await;
    assert_eq!(stranger["abstained"], true, "{stranger}");
    assert!(close(&stranger["relevance_floor"], 0.45), "{stranger}");
    assert_eq!(
        stranger["unmentioned_names"],
        json!(["caroline"]),
        "{stranger}"
    );
    // Once a memory names her, she is someone known: the usual floor, and her memory first.
    client
        .add_one(json!({
            "content": "Caroline is the user's sister; she drinks espresso.",
            "user_id": "tea-lover",
        }))
        .await;
    let known = search_ok(&client, about_caroline).await;
    assert_eq!(known["abstained"], false, "{known}");
    assert!(contents(&known)[0].contains("Caroline"), "{known}");
    assert!(known.get("unmentioned_names").is_none(), "{known}");
    assert!(close(&known["relevance_floor"], 0.15), "{known}");
    // The end-user searched for is someone known, though their facts name no one.
    client
        .add_one(json!({"content": "Likes oolong tea.", "user_id": "caroline"}))
        .await;
    let own = search_ok(
        &client,
        json!({"query": "What does Caroline like to drink?", "user_id": "caroline"}),
    )
    .await;
    assert_eq!(own["abstained"], false, "{own}");
    assert!(contents(&own)[0].contains("oolong"), "{own}");

    // An admin sets the floor measured for conversation turns.
    let saved = settings_patch(&client, json!({"relevance_floor": 0.38})).await;
    assert_eq!(saved.status, 200, "{}", saved.body);
    assert_eq!(
        saved.body["relevance_floor_setting"], 0.38,
        "{}",
        saved.body
    );
    let nothing = search_ok(&client, unrelated.clone()).await;
    assert_eq!(contents(&nothing), Vec::<String>::new(), "{nothing}");
    assert_eq!(nothing["abstained"], true, "{nothing}");
    assert!((nothing["relevance_floor"].as_f64().unwrap() - 0.38).abs() < 1e-6);

    let asked = search_ok(
        &client,
        json!({"query": "what does the user like to drink?", "user_id": "tea-lover"}),
    )
    .await;
    assert_eq!(asked["abstained"], false, "{asked}");
    assert!(!contents(&asked).is_empty(), "{asked}");
    for result in asked["results"].as_array().unwrap() {
        assert!(result["relevance"].as_f64().unwrap() >= 0.38, "{result}");
    }
    // A memory holding the query word for word is relevant whatever the model makes of it.
    client
        .add_one(
            json!({"content": "Ticket OPS-4471 tracks the tea order.", "user_id": "tea-lover"}),
        )
        .await;
    let ticket = search_ok(
        &client,
        json!({"query": "OPS-4471", "user_id": "tea-lover"}),
    )
    .await;
    assert!(contents(&ticket)[0].contains("OPS-4471"), "{ticket}");

    // An explicit cut-off, 0 included, replaces the floor.
    let mut explicit = unrelated.clone();
    explicit["min_score"] = json!(0);
    let everything = search_ok(&client, explicit).await;
    assert_eq!(contents(&everything).len(), 4, "{everything}");
    assert_eq!(everything["abstained"], false);
    assert!(everything.get("relevance_floor").is_none(), "{everything}");

    // The context's memories part holds to the same floor.
    let context = client
        .send(client.request(reqwest::Method::POST, "/v1/context").json(
            &json!({"user_id": "tea-lover", "query": "unicorn dragons", "token_budget": 400}),
        ))
        .await;
    assert_eq!(context.status, 200, "{}", context.body);
    assert!(
        !context.body["context"]
            .as_str()
            .unwrap_or("")
            .contains("tea"),
        "{}",
        context.body
    );

    // A bad floor is refused, naming the field, and changes nothing.
    for bad in [json!(1.5), json!("banana"), json!(-0.1)] {
        settings_patch(&client, json!({"relevance_floor": bad}))
            .await
            .assert_problem(422, "validation-failed");
    }
    assert_eq!(
        search_ok(&client, unrelated.clone()).await["abstained"],
        true
    );
    // 0 is no floor at all, for unmentioned names too.
    let saved = settings_patch(&client, json!({"relevance_floor": 0})).await;
    assert_eq!(
        saved.body["relevance_floor_for_unmentioned_names"], 0.0,
        "{}",
        saved.body
    );
    let unfloored = search_ok(&client, unrelated.clone()).await;
    assert_eq!(contents(&unfloored).len(), 4, "{unfloored}");
    assert_eq!(unfloored["abstained"], false);
    assert!(unfloored.get("relevance_floor").is_none(), "{unfloored}");
    // Back to the model's floors.
    let saved = settings_patch(&client, json!({"relevance_floor": "model"})).await;
    assert_eq!(
        saved.body["relevance_floor_setting"], "model",
        "{}",
        saved.body
    );
    assert_eq!(search_ok(&client, unrelated).await["abstained"], true);

    // A project on client vectors gets no floor: its scores are not ours to calibrate.
    let (_, key) = server.create_project("own-vectors").unwrap();
    let own = server.client_with_key(&key);
    let saved = settings_patch(
        &own,
        json!({"embedding": {"source": "client", "dimension": 3}}),
    )
    .await;
    assert_eq!(saved.status, 200, "{}", saved.body);
    assert_eq!(saved.body["relevance_floor"], 0.0, "{}", saved.body);
    assert_eq!(
        saved.body["relevance_floor_for_unmentioned_names"], 0.0,
        "{}",
        saved.body
    );
}

/// The turn that answers a question often shares no word with it ("What did you bake?" —
/// "A lemon drizzle cake."): it rises toward the turn next to it that matches, so the same
/// words said in another session rank below it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_next_to_the_question_it_answers_ranks_with_it() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let answer = "Melanie: A lemon drizzle cake with poppy seeds.";
    // Written one at a time, in the order they were said.
    for (content, session) in [
        (
            "Caroline: What did you bake for the school fair, Melanie?",
            "fair",
        ),
        (answer, "fair"),
        ("Caroline: The kids loved the bouncy castle.", "fair"),
        ("Caroline: How was the picnic by the river?", "picnic"),
        ("Melanie: The weather was lovely all afternoon.", "picnic"),
        ("Caroline: Did anyone bring dessert?", "picnic"),
        (answer, "picnic"),
    ] {
        client
            .add_one(json!({"content": content, "user_id": "mel", "session_id": session}))
            .await;
    }
    let ask = |extra: Value| {
        let mut body = json!({
            "query": "What did Melanie bake for the school fair?",
            "user_id": "mel",
            "explain": true,
            "diversify": false,
            "recency_weight": 0,
        });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let answers = |body: &Value| -> Vec<(String, f64)> {
        body["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|result| result["memory"]["content"] == answer)
            .map(|result| {
                (
                    result["memory"]["session_id"].as_str().unwrap().to_string(),
                    result["signals"]["neighbour_bonus"].as_f64().unwrap(),
                )
            })
            .collect()
    };

    let body = search_ok(&client, ask(json!({}))).await;
    let ranked = answers(&body);
    assert_eq!(ranked.len(), 2, "{body}");
    assert_eq!(ranked[0].0, "fair", "the fair's answer first: {body}");
    assert!(ranked[0].1 > ranked[1].1, "{ranked:?}");
    // The answer ranks right after the question it answers.
    assert_eq!(
        contents(&body)[..2],
        [
            "Caroline: What did you bake for the school fair, Melanie?".to_string(),
            answer.to_string()
        ],
        "{body}"
    );

    // Without neighbours the two are the same words with the same score: the newer first.
    let body = search_ok(&client, ask(json!({"neighbour_weight": 0}))).await;
    let ranked = answers(&body);
    assert_eq!(ranked.len(), 2, "{body}");
    assert_eq!(ranked[0].0, "picnic", "{body}");
    assert!(ranked.iter().all(|(_, bonus)| *bonus == 0.0), "{ranked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_named_in_the_question_lifts_memories_of_that_time_in_english_and_chinese() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    for (content, occurred_at) in [
        (
            "Went hiking in the Alps with friends.",
            "2026-11-10T09:00:00Z",
        ),
        ("Went to a concert in Berlin.", "2026-10-05T20:00:00Z"),
        (
            "Visited the Louvre museum in Paris.",
            "2026-12-02T15:00:00Z",
        ),
    ] {
        client
            .add_one(
                json!({"content": content, "user_id": "traveller", "occurred_at": occurred_at}),
            )
            .await;
    }
    let now = "2026-12-03T10:00:00Z";
    for (query, phrase, from, expected) in [
        (
            "what did I do last month?",
            "last month",
            "2026-11-01",
            "Alps",
        ),
        ("上个月我做了什么？", "上个月", "2026-11-01", "Alps"),
        (
            "what did I do yesterday?",
            "yesterday",
            "2026-12-02",
            "Louvre",
        ),
        (
            "what did I do in October?",
            "in october",
            "2026-10-01",
            "Berlin",
        ),
    ] {
        let body = search_ok(
            &client,
            json!({"query": query, "user_id": "traveller", "now": now, "explain": true}),
        )
        .await;
        let understood = &body["understood_time"];
        assert_eq!(understood["phrase"], phrase, "{query}: {body}");
        assert!(
            understood["from"].as_str().unwrap().starts_with(from),
            "{query}: {understood}"
        );
        assert_eq!(understood["applied"], "boost", "{understood}");
        let first = &body["results"][0];
        assert!(
            first["memory"]["content"]
                .as_str()
                .unwrap()
                .contains(expected),
            "{query}: {body}"
        );
        assert_eq!(first["signals"]["time_bonus"], 0.1, "{first}");
        // A boost, not a filter: with no relevance floor the other memories are still there.
        let unfloored = search_ok(
            &client,
            json!({"query": query, "user_id": "traveller", "now": now, "min_score": 0}),
        )
        .await;
        assert_eq!(contents(&unfloored).len(), 3, "{query}: {unfloored}");
    }
    let plain = search_ok(
        &client,
        json!({"query": "where did I go hiking?", "user_id": "traveller", "now": now, "explain": true}),
    )
    .await;
    assert!(plain.get("understood_time").is_none(), "{plain}");
}

async fn finished_task(client: &ApiClient, task_id: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let task = client
            .send(client.request(reqwest::Method::GET, &format!("/v1/tasks/{task_id}")))
            .await;
        assert_eq!(task.status, 200, "{}", task.body);
        if matches!(task.body["status"].as_str(), Some("succeeded" | "failed")) {
            return task.body;
        }
        assert!(
            started.elapsed() < engram_tests::patience(),
            "{}",
            task.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consolidation_merges_near_duplicates_of_one_subject_and_keeps_their_history() {
    let server = TestServer::spawn().await.unwrap();
    let client = server.client();
    let oldest = client
        .add_one(json!({"content": "Ana's flight to Oslo leaves on March 3", "user_id": "ana"}))
        .await;
    let older = client
        .add_one(json!({"content": "Ana's flight to Oslo leaves on March 3.", "user_id": "ana"}))
        .await;
    let newest = client
        .add_one(json!({"content": "ana's flight to Oslo leaves on March 3!", "user_id": "ana"}))
        .await;
    client
        .add_one(json!({"content": "Ana is vegetarian", "user_id": "ana"}))
        .await;
    let bobs = client
        .add_one(json!({"content": "Ana's flight to Oslo leaves on March 3", "user_id": "bob"}))
        .await;
    let episodic_copy = client
        .add_one(json!({"content": "Ana's flight to Oslo leaves on March 3", "user_id": "ana", "kind": "episodic"}))
        .await;
    // A copy shared with one team of agents only is never merged with the others: a merge
    // would hand its words to every agent, or theirs to the team alone.
    let teams = client
        .send(
            client
                .request(reqwest::Method::PATCH, "/v1/project/settings")
                .json(&json!({"agent_teams": {"travel": ["booker"]}})),
        )
        .await;
    assert_eq!(teams.status, 200, "{}", teams.body);
    let team_copy = client
        .add_one(json!({"content": "Ana's flight to Oslo leaves on March 3", "user_id": "ana", "shared_with": "travel"}))
        .await;

    let queued = client
        .send(client.request(reqwest::Method::POST, "/v1/consolidations"))
        .await;
    assert_eq!(queued.status, 202, "{}", queued.body);
    assert_eq!(queued.body["kind"], "consolidation");
    let task = finished_task(&client, queued.body["id"].as_str().unwrap()).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let merges = task["result"]["merges"].as_array().unwrap();
    assert_eq!(merges.len(), 1, "only Ana's three semantic copies: {task}");
    assert_eq!(merges[0]["kept"], newest["id"]);
    let mut merged: Vec<&str> = merges[0]["merged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    merged.sort();
    let mut expected = vec![
        oldest["id"].as_str().unwrap(),
        older["id"].as_str().unwrap(),
    ];
    expected.sort();
    assert_eq!(merged, expected);
    assert_eq!(task["result"]["memories_superseded"], 2);

    // The merged ones are superseded, with the reason in their history; nothing was deleted.
    let superseded = client.get(oldest["id"].as_str().unwrap()).await;
    assert_eq!(
        superseded.body["state"], "superseded",
        "{}",
        superseded.body
    );
    let history = client.history(oldest["id"].as_str().unwrap()).await;
    assert!(
        history.body.to_string().contains("merged into"),
        "{}",
        history.body
    );
    // Search returns the fact once; Bob's copy and the episodic copy stay.
    let found = search_ok(
        &client,
        json!({"query": "flight to Oslo", "diversify": false, "top_k": 20}),
    )
    .await;
    let ids: Vec<&str> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| result["memory"]["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&newest["id"].as_str().unwrap()), "{found}");
    assert!(ids.contains(&bobs["id"].as_str().unwrap()), "{found}");
    assert!(
        ids.contains(&episodic_copy["id"].as_str().unwrap()),
        "{found}"
    );
    assert!(ids.contains(&team_copy["id"].as_str().unwrap()), "{found}");
    assert!(!ids.contains(&oldest["id"].as_str().unwrap()), "{found}");
    assert!(!ids.contains(&older["id"].as_str().unwrap()), "{found}");

    // A second run finds nothing left to merge.
    let again = client
        .send(client.request(reqwest::Method::POST, "/v1/consolidations"))
        .await;
    let task = finished_task(&client, again.body["id"].as_str().unwrap()).await;
    assert_eq!(task["result"]["merges"], json!([]), "{task}");
}

/// With an LLM (the scripted stand-in for a provider), consolidation compacts a session's old
/// episodes into one summary; the episodes stay in history as superseded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consolidation_compacts_old_episodes_into_a_summary_with_an_llm() {
    let stand_in = LlmStandIn::start(|request| {
        assert!(request.system_prompt.contains("compact"), "{}", request.system_prompt);
        let episodes = request.user_prompt.lines().count();
        ScriptedReply::Json {
            content: json!({
                "summary": format!("Over {episodes} chats Ana planned her Oslo trip: flights booked, hotel near the harbour."),
                "reason": "four planning chats say one thing",
            }),
            prompt_tokens: 200,
            completion_tokens: 30,
        }
    })
    .await
    .unwrap();
    let directory = tempfile::tempdir().unwrap();
    let server = TestServer::spawn_with(
        directory.path(),
        &[
            ("ENGRAM_LLM_BASE_URL", stand_in.base_url.as_str()),
            ("ENGRAM_LLM_MODEL", "stand-in-chat"),
            ("ENGRAM_CONSOLIDATION_COMPACT_AFTER_SECS", "1"),
        ],
    )
    .await
    .unwrap();
    let client = server.client();
    let episodes = [
        "Ana asked about flights to Oslo",
        "Ana booked the 7:40 flight to Oslo",
        "Ana compared hotels near the harbour",
        "Ana booked the harbour hotel for three nights",
    ];
    let mut episode_ids = Vec::new();
    for content in episodes {
        let memory = client
            .add_one(json!({"content": content, "user_id": "ana", "session_id": "trip", "kind": "episodic"}))
            .await;
        episode_ids.push(memory["id"].as_str().unwrap().to_string());
    }
    // Too few to compact: another session with one episode, and a fresh semantic fact.
    client
        .add_one(json!({"content": "Ana asked for the weather", "user_id": "ana", "session_id": "other", "kind": "episodic"}))
        .await;
    client
        .add_one(json!({"content": "Ana is vegetarian", "user_id": "ana"}))
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;

    let queued = client
        .send(client.request(reqwest::Method::POST, "/v1/consolidations"))
        .await;
    assert_eq!(queued.status, 202, "{}", queued.body);
    let task = finished_task(&client, queued.body["id"].as_str().unwrap()).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    let compactions = task["result"]["compactions"].as_array().unwrap();
    assert_eq!(compactions.len(), 1, "{task}");
    let mut replaced: Vec<String> = compactions[0]["replaced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap().to_string())
        .collect();
    replaced.sort();
    let mut expected = episode_ids.clone();
    expected.sort();
    assert_eq!(replaced, expected);
    assert_eq!(task["result"]["llm_calls"], 1);

    let summary_id = compactions[0]["summary"].as_str().unwrap();
    let summary = client.get(summary_id).await;
    assert_eq!(summary.body["kind"], "episodic");
    assert_eq!(summary.body["session_id"], "trip");
    assert_eq!(summary.body["source"], "model_inferred");
    assert!(
        summary.body["content"]
            .as_str()
            .unwrap()
            .contains("Over 4 chats"),
        "{}",
        summary.body
    );
    assert_eq!(
        summary.body["metadata"]["compacted_from"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    for episode in &episode_ids {
        let old = client.get(episode).await;
        assert_eq!(old.body["state"], "superseded", "{}", old.body);
        let history = client.history(episode).await;
        assert!(
            history.body.to_string().contains("compacted into summary"),
            "{}",
            history.body
        );
    }
    let found = client.search_contents("Oslo trip").await;
    assert!(
        found.iter().any(|content| content.contains("Over 4 chats")),
        "{found:?}"
    );
    assert!(
        !found
            .iter()
            .any(|content| content == "Ana booked the 7:40 flight to Oslo"),
        "{found:?}"
    );
    // The LLM's tokens are metered like every other call.
    let usage = client
        .send(client.request(reqwest::Method::GET, "/v1/usage"))
        .await;
    assert_eq!(usage.body["totals"]["llm_tokens_in"], 200, "{}", usage.body);
}

/// A deployment may embed with an OpenAI-compatible provider instead of the local model
/// (the provider here is the scripted stand-in: a third-party API we cannot run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedding_provider_replaces_the_local_model() {
    let provider = EmbeddingStandIn::start(64).await.unwrap();
    let directory = tempfile::tempdir().unwrap();
    let environment = [
        ("ENGRAM_EMBEDDING_BASE_URL", provider.base_url.as_str()),
        ("ENGRAM_EMBEDDING_MODEL", "stand-in-bag-of-words"),
        ("ENGRAM_EMBEDDING_DIMENSION", "64"),
    ];
    let server = TestServer::spawn_with(directory.path(), &environment)
        .await
        .unwrap();
    let client = server.client();
    let added = client
        .add(json!([
            {"content": "Lena drinks green tea every morning", "user_id": "lena"},
            {"content": "Lena rides a blue bicycle to work", "user_id": "lena"},
            {"content": "The office closes at six", "user_id": "lena"},
        ]))
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    assert_eq!(
        provider.texts_embedded(),
        3,
        "the stored memories went to the provider"
    );
    let found = search_ok(
        &client,
        json!({"query": "green tea", "user_id": "lena", "retrieval": "dense", "explain": true}),
    )
    .await;
    assert_eq!(
        found["results"][0]["memory"]["content"], "Lena drinks green tea every morning",
        "{found}"
    );
    assert_eq!(provider.texts_embedded(), 4, "and so did the query");
    // Its own index, beside the local model's.
    assert!(
        directory
            .path()
            .join("index_stand-in-bag-of-words")
            .is_dir(),
        "{:?}",
        std::fs::read_dir(directory.path())
            .unwrap()
            .collect::<Vec<_>>()
    );

    // The same data with the local model would compare vectors of two models: refused.
    let (_, data_dir, _) = server.stop();
    assert!(
        TestServer::spawn_in(&data_dir).await.is_err(),
        "a server embedding with another model must not start on this data"
    );
    // With the provider again, everything is there.
    let server = TestServer::spawn_with(&data_dir, &environment)
        .await
        .unwrap();
    let found = server.client().search_contents("bicycle").await;
    assert_eq!(
        found.first().map(String::as_str),
        Some("Lena rides a blue bicycle to work")
    );
}

/// The LoCoMo benchmark on its smallest dev conversation: ingest through the API, the three
/// methods side by side, and the hybrid default at least as good as either alone at hit@10.
#[test]
fn the_recall_benchmark_prints_its_table() {
    let data = workspace_root().join("../shared/bench/locomo");
    if !data.join("turns.jsonl").exists() {
        println!("SKIPPED: LoCoMo data not found at {}", data.display());
        return;
    }
    let stdout = run_bench(&[
        "bench-recall",
        "--data",
        &data.display().to_string(),
        "--conversations",
        "conv-30",
        "--evaluation",
    ]);
    let hit_at_10 = |method: &str| -> f64 {
        let row = stdout
            .lines()
            .find(|line| line.starts_with(&format!("| {method} | cat 1-4 |")))
            .unwrap_or_else(|| panic!("no {method} row in:\n{stdout}"));
        row.split('|')
            .map(str::trim)
            .nth(6)
            .unwrap()
            .parse()
            .unwrap()
    };
    let (dense, keyword, hybrid) = (
        hit_at_10("dense"),
        hit_at_10("keyword (BM25)"),
        hit_at_10("hybrid (default)"),
    );
    assert!(stdout.contains("| hybrid (default) | cat 5 |"), "{stdout}");
    assert!(
        stdout.contains("| hybrid, time read at the last session | cat 2 (temporal) |"),
        "{stdout}"
    );
    // The floor's cost and abstention, at the default and at the measured floor.
    assert!(stdout.contains("| 0.38 | "), "{stdout}");
    // The same questions as an evaluation set through the API: its hit@10 is the table's.
    let evaluation_hit_at_10 = |profile: &str| -> f64 {
        let row = stdout
            .lines()
            .find(|line| line.starts_with(&format!("| {profile} | 0.")))
            .unwrap_or_else(|| panic!("no evaluation row for {profile} in:\n{stdout}"));
        row.split('|')
            .map(str::trim)
            .nth(3)
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(stdout.contains("| hybrid vs dense | mrr |"), "{stdout}");
    assert!(
        (evaluation_hit_at_10("hybrid") - hit_at_10("hybrid (default)")).abs() < 0.02,
        "the evaluation run and the benchmark agree on hybrid hit@10"
    );
    assert!((evaluation_hit_at_10("dense") - hit_at_10("dense")).abs() < 0.02);
    // Ranking: the hybrid default, before its relevance floor leaves anything out, at least
    // as good as either signal alone; the floor itself costs at most 0.02 of hit@10.
    let unfloored = hit_at_10("hybrid, no floor");
    assert!(
        unfloored >= dense && unfloored >= keyword,
        "hybrid {unfloored} vs dense {dense}, keyword {keyword}"
    );
    assert!(
        unfloored - hybrid <= 0.02 + 1e-9,
        "the model's floor costs {:.3} of hit@10 ({hybrid} against {unfloored})",
        unfloored - hybrid
    );
    // Borrowing from neighbouring turns is what lifts the default; without it, it falls back.
    let without_neighbours = hit_at_10("hybrid, no neighbours");
    assert!(
        hybrid > without_neighbours,
        "hybrid {hybrid} vs the same without neighbours {without_neighbours}"
    );
}

/// `engram bench-scale` at a small size: the bench client runs in its own process, every row
/// the scale benchmark prints is there, and dense recall@10 against exact search (computed
/// by the client from the seed) is what a small, exactly searched index gives: all of it.
#[test]
fn the_scale_benchmark_measures_recall_against_exact_search_from_its_own_process() {
    let stdout = run_bench(&[
        "bench-scale",
        "--memories",
        "3000",
        "--queries",
        "20",
        "--clients",
        "4",
        "--writers",
        "2",
        "--end-users",
        "30",
    ]);
    let value_of = |row_start: &str, column: usize| -> f64 {
        let row = stdout
            .lines()
            .find(|line| line.starts_with(row_start))
            .unwrap_or_else(|| panic!("no row starting {row_start:?} in:\n{stdout}"));
        row.split('|')
            .map(str::trim)
            .nth(column)
            .and_then(|cell| cell.split_whitespace().next())
            .and_then(|number| number.parse().ok())
            .unwrap_or_else(|| panic!("no number in column {column} of {row:?}"))
    };
    assert!(
        stdout.contains("3000 memories in one project over 30 end-users"),
        "{stdout}"
    );
    let recall = value_of("| dense recall@10 against exact search", 2);
    assert!(
        recall >= 0.99,
        "a 3,000-memory index is searched exactly, yet recall@10 is {recall}"
    );
    for mode in ["dense", "keyword", "hybrid"] {
        assert!(
            value_of(&format!("| {mode} |"), 2) > 0.0,
            "{mode}: {stdout}"
        );
    }
    assert!(value_of("| 4 clients |", 5) > 0.0, "{stdout}");
    assert!(value_of("| 1 client beside a load", 5) > 0.0, "{stdout}");
    assert!(
        value_of("| server VmRSS now (its own process) |", 2) > 0.0,
        "{stdout}"
    );
    assert!(
        value_of("| server peak VmRSS (VmHWM) |", 2) > 0.0,
        "{stdout}"
    );
}
